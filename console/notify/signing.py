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

from django.conf import settings

from console.tenancy.crypto import SecretBox, box
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


def _legacy(secret_key: str) -> bytes:
    """The key of webhook secrets stored before they had a box of their own (hashed SECRET_KEY)."""
    return base64.urlsafe_b64encode(hashlib.sha256(b"ibconsole.notify.webhook-secret:" + secret_key.encode()).digest())


def _box() -> SecretBox:
    old = (settings.SECRET_KEY, *(getattr(settings, "SECRET_KEY_FALLBACKS", ()) or ()))
    return box("webhook", legacy=tuple(_legacy(k) for k in old))


def encrypt_secret(secret: str) -> str:
    """Under CONSOLE_WEBHOOK_KEY, or a key derived from SECRET_KEY (console.tenancy.crypto)."""
    return _box().encrypt(secret)


def decrypt_secret(token: str) -> str:
    return _box().decrypt(token)


def reencrypt_secret(token: str) -> str:
    return _box().reencrypt(token)


def check_url(url: str) -> list[str]:
    """Refuse what a webhook must not reach: schemes other than http(s), a user part, and unless
    ``NOTIFY_ALLOW_PRIVATE_URLS`` (the demo and tests, whose receivers are local) hosts that
    resolve to loopback, private, link-local or reserved addresses (save the demo's own receiver,
    ``NOTIFY_DEMO_SINK_URL``, exactly). Checked at registration and again before every POST (a
    name may resolve elsewhere later); returns the addresses it checked, which the POST connects
    to (never resolving the name again: a rebinding DNS answer cannot slip in between), [] when
    the name did not resolve and private addresses are allowed (the POST then fails)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid("webhook URLs are http:// or https:// with a host", fields={"url": ["http or https only"]})
    try:
        port = parts.port
    except ValueError:
        raise Invalid("the URL's port is not a port (1-65535)", fields={"url": ["port out of range"]}) from None
    if parts.username is not None or parts.password is not None:
        # (a delivery would send them, and the requests library would not even try)
        raise Invalid("a webhook URL carries no user or password", fields={"url": ["no user:password@"]})
    private_ok = settings.NOTIFY_ALLOW_PRIVATE_URLS or bool(
        settings.NOTIFY_DEMO_SINK_URL and url == settings.NOTIFY_DEMO_SINK_URL
    )  # the demo's own receiver is that one URL exactly, not its host
    refused = Invalid(
        f"{parts.hostname} is not a public address",  # (never how it resolves: that would tell)
        fields={"url": ["private, loopback, link-local, multicast and reserved addresses are refused"]},
    )
    default = 443 if parts.scheme == "https" else 80
    try:
        infos = socket.getaddrinfo(parts.hostname, port or default, proto=socket.IPPROTO_TCP)
    except OSError:
        if private_ok:
            return []
        raise refused from None
    addresses = [str(info[4][0]).split("%", 1)[0] for info in infos]
    if not private_ok and (not addresses or not all(public(ipaddress.ip_address(a)) for a in addresses)):
        raise refused
    return list(dict.fromkeys(addresses))


#: IPv6 prefixes that carry an IPv4 address in their last 32 bits: NAT64 (RFC 6052, the metadata
#: address included: 64:ff9b::a9fe:a9fe) and the deprecated IPv4-compatible form (::a.b.c.d).
_EMBEDS_V4 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("::/96"))


def public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """An address a webhook may reach: global unicast, and for an IPv6 address that carries an
    IPv4 one (mapped, 6to4, NAT64, IPv4-compatible, Teredo) that one too; never multicast,
    site-local or reserved (Python's ``is_global`` lets several of those through)."""
    if address.is_multicast or address.is_reserved or address.is_unspecified or not address.is_global:
        return False
    if isinstance(address, ipaddress.IPv4Address):
        return True
    if address.is_site_local:
        return False
    inner = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
    inner += [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) for net in _EMBEDS_V4 if address in net]
    return all(public(v4) for v4 in inner if v4 is not None)
