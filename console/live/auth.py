"""WebSocket authentication: the browser's session cookie or an API token.

Tokens travel in the ``Sec-WebSocket-Protocol`` header as ``bearer.<token>`` (browsers cannot set
Authorization on sockets; query strings end up in logs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from channels.auth import AuthMiddleware
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.contrib.auth.models import AnonymousUser
from rest_framework.exceptions import AuthenticationFailed

from console.tenancy.authentication import resolve_token

if TYPE_CHECKING:
    from asgiref.typing import ASGIReceiveCallable, ASGISendCallable
    from channels.consumer import _ChannelScope
    from channels.utils import _ChannelApplication
    from django.contrib.auth.base_user import AbstractBaseUser

    from console.tenancy.models import ApiToken

TOKEN_SUBPROTOCOL_PREFIX = "bearer."


def token_from_scope(scope: Mapping[str, Any]) -> str | None:
    """The raw API token a socket offered as its ``bearer.<token>`` subprotocol, if any."""
    for subprotocol in scope.get("subprotocols") or []:
        if subprotocol.startswith(TOKEN_SUBPROTOCOL_PREFIX):
            return subprotocol[len(TOKEN_SUBPROTOCOL_PREFIX) :]
    return None


def api_token_of(scope: Mapping[str, Any]) -> ApiToken | None:
    """The API token the socket authenticated with (None with session auth)."""
    token: ApiToken | None = scope.get("api_token")
    return token


@database_sync_to_async
def _user_for_token(raw: str) -> tuple[AbstractBaseUser | AnonymousUser, ApiToken | None]:
    try:
        token = resolve_token(raw)
    except AuthenticationFailed:
        return AnonymousUser(), None
    return token.user, token


class _TokenAuth(BaseMiddleware):
    async def __call__(
        self, scope: _ChannelScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> _ChannelApplication:
        # "api_token" is this console's own scope key, which channels' scope type does not declare.
        own_scope = cast("dict[str, Any]", scope)
        raw = token_from_scope(scope)
        if raw is not None:
            user, token = await _user_for_token(raw)
            own_scope["user"], own_scope["api_token"] = user, token
        else:
            own_scope.setdefault("api_token", None)
        return await super().__call__(scope, receive, send)


def TokenOrSessionAuthMiddleware(inner: _ChannelApplication) -> CookieMiddleware:
    """Session auth first; a token subprotocol, when present, overrides it."""
    return CookieMiddleware(SessionMiddleware(AuthMiddleware(_TokenAuth(inner))))
