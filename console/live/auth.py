"""WebSocket authentication: the browser's session cookie or an API token.

Tokens travel in the ``Sec-WebSocket-Protocol`` header as ``bearer.<token>`` (browsers cannot set
Authorization on sockets; query strings end up in logs).
"""

from __future__ import annotations

from channels.auth import AuthMiddleware
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.contrib.auth.models import AnonymousUser
from rest_framework.exceptions import AuthenticationFailed

from console.tenancy.authentication import resolve_token

TOKEN_SUBPROTOCOL_PREFIX = "bearer."


def token_from_scope(scope: dict) -> str | None:
    for subprotocol in scope.get("subprotocols") or []:
        if subprotocol.startswith(TOKEN_SUBPROTOCOL_PREFIX):
            return subprotocol[len(TOKEN_SUBPROTOCOL_PREFIX) :]
    return None


@database_sync_to_async
def _user_for_token(raw: str):
    try:
        token = resolve_token(raw)
    except AuthenticationFailed:
        return AnonymousUser(), None
    return token.user, token


class _TokenAuth(BaseMiddleware):
    async def __call__(self, scope, receive, send):
        raw = token_from_scope(scope)
        if raw is not None:
            user, token = await _user_for_token(raw)
            scope["user"], scope["api_token"] = user, token
        else:
            scope.setdefault("api_token", None)
        return await super().__call__(scope, receive, send)


def TokenOrSessionAuthMiddleware(inner):
    """Session auth first; a token subprotocol, when present, overrides it."""
    return CookieMiddleware(SessionMiddleware(AuthMiddleware(_TokenAuth(inner))))
