"""Webhook signatures, secrets at rest and the URL guard.

What is signed: the bytes ``f"{timestamp}.".encode() + body``, where ``timestamp`` is the
``X-IBConsole-Timestamp`` header (Unix seconds, decimal) and ``body`` the raw request body. The
header ``X-IBConsole-Signature`` is ``sha256=`` + the lowercase hex HMAC-SHA256 of those bytes
with the webhook's secret (UTF-8). A receiver recomputes it, compares in constant time and
refuses timestamps older than a few minutes (replays); ``X-IBConsole-Event-Id`` is the
idempotency key (the same event retried carries the same id).

Secrets are stored encrypted with Fernet (the ``cryptography`` package, already installed as a
dependency of our dependencies and now pinned directly: AES-128-CBC + HMAC, no home-made crypto)
under a key derived from SECRET_KEY.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
import socket
from urllib.parse import urlsplit

from cryptography.fernet import Fernet
from django.conf import settings

from console.tenancy.errors import Invalid

SIGNATURE_HEADER = "X-IBConsole-Signature"
TIMESTAMP_HEADER = "X-IBConsole-Timestamp"
EVENT_ID_HEADER = "X-IBConsole-Event-Id"
EVENT_TYPE_HEADER = "X-IBConsole-Event-Type"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=<hex>`` over ``b"<timestamp>." + body``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def new_secret() -> str:
    return f"whsec_{secrets.token_urlsafe(32)}"


def _fernet() -> Fernet:
    key = hashlib.sha256(b"ibconsole.notify.webhook-secret:" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def encrypt_secret(secret: str) -> str:
    return _fernet().encrypt(secret.encode()).decode()


def decrypt_secret(token: str) -> str:
    return _fernet().decrypt(token.encode()).decode()


def check_url(url: str) -> None:
    """Refuse what a webhook must not reach: schemes other than http(s), and unless
    ``NOTIFY_ALLOW_PRIVATE_URLS`` (the demo and tests, whose receivers are local) hosts that
    resolve to loopback, private, link-local or reserved addresses (save the demo's own receiver,
    ``NOTIFY_DEMO_SINK_URL``, exactly). Checked at registration and
    again before every POST (a name may resolve elsewhere later)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid("webhook URLs are http:// or https:// with a host", fields={"url": ["http or https only"]})
    if settings.NOTIFY_ALLOW_PRIVATE_URLS or (settings.NOTIFY_DEMO_SINK_URL and url == settings.NOTIFY_DEMO_SINK_URL):
        return  # the demo's own receiver is that one URL exactly, not its host
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise Invalid(f"cannot resolve {parts.hostname}", fields={"url": ["host does not resolve"]}) from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise Invalid(
                f"{parts.hostname} resolves to a non-public address ({address})",
                fields={"url": ["private, loopback and link-local addresses are refused"]},
            )
