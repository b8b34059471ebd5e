"""The WebSocket Origin check: scheme, host and port must be those of an allowed origin.

Channels' ``AllowedHostsOriginValidator`` compares the Origin's host name only, so any other web
app on the same host name (another port, or plain http beside https) could open a socket with a
logged-in user's cookie and read the user's live streams. Here an Origin is allowed when it is one
of ``CONSOLE_ALLOWED_ORIGINS`` exactly (scheme, host and port; default ports made explicit), or,
when that setting is empty, when it is the console's own origin: the scheme the socket came in on
(``ws`` → ``http``, ``wss`` → ``https``, or ``https`` behind a proxy that says so through
``SECURE_PROXY_SSL_HEADER``) with the ``Host`` the browser connected to, which must itself be one
of ``ALLOWED_HOSTS`` (else a DNS-rebound name would be "its own origin"). A socket without an
Origin is refused too: browsers always send one, and the console's own clients set it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from channels.middleware import BaseMiddleware
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

if TYPE_CHECKING:
    from asgiref.typing import ASGIReceiveCallable, ASGISendCallable
    from channels.consumer import _ChannelScope
    from channels.utils import _ChannelApplication

DEFAULT_PORTS = {"http": 80, "https": 443}

#: (scheme, host, port) of a web origin.
Origin = tuple[str, str, int]


def parse_origin(value: str) -> Origin | None:
    """``scheme://host[:port]`` as a normalised triple; None for anything else (``null``, paths)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/") or parts.query:
        return None
    if parts.username is not None or parts.password is not None:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]


def _header(scope: _ChannelScope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _secure(scope: _ChannelScope) -> bool:
    if scope.get("scheme") in ("wss", "https"):
        return True
    proxy: tuple[str, str] | None = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy is None:
        return False
    meta_name, expected = proxy
    header = meta_name.removeprefix("HTTP_").replace("_", "-").lower().encode()
    value = _header(scope, header)
    return value is not None and value.split(",", 1)[0].strip() == expected


def own_origin(scope: _ChannelScope) -> Origin | None:
    """The console's own origin as this socket reached it; None if its Host is not allowed."""
    host = _header(scope, b"host")
    if not host:
        return None
    domain, _port = split_domain_port(host.lower())
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    return parse_origin(("https://" if _secure(scope) else "http://") + host)


def allowed_origins(configured: Iterable[str], scope: _ChannelScope) -> set[Origin]:
    """The origins a socket may come from: the configured ones, else the console's own."""
    configured = list(configured)
    if configured:
        parsed = {parse_origin(value) for value in configured}
        return {o for o in parsed if o is not None}
    own = own_origin(scope)
    return {own} if own is not None else set()


def origin_allowed(scope: _ChannelScope, configured: Iterable[str]) -> bool:
    """Whether the socket's Origin header is exactly one of :func:`allowed_origins`."""
    raw = _header(scope, b"origin")
    origin = parse_origin(raw) if raw is not None else None
    return origin is not None and origin in allowed_origins(configured, scope)


class OriginValidator(BaseMiddleware):
    """ASGI middleware: refuses (HTTP 403 on the handshake) a socket from any other origin."""

    async def __call__(
        self, scope: _ChannelScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> _ChannelApplication:
        if scope["type"] != "websocket":
            raise ValueError("OriginValidator guards WebSocket connections only")
        if origin_allowed(scope, settings.CONSOLE_ALLOWED_ORIGINS):
            return await super().__call__(scope, receive, send)
        await _DENIER(scope, receive, send)
        return self.inner  # the stubs type the result as an application; servers ignore it


_DENIER = WebsocketDenier.as_asgi()
