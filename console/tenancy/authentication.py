"""API token authentication: ``Authorization: Bearer ibc_<prefix>_<secret>``."""

from __future__ import annotations

import datetime as dt
import hmac
from typing import TYPE_CHECKING, Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from console.tenancy.models import TOKEN_PREFIX, ApiToken, hash_token_secret
from console.tenancy.throttling import check_anonymous

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from rest_framework.request import Request

LAST_USED_GRANULARITY = dt.timedelta(minutes=1)


def resolve_token(raw: str) -> ApiToken:
    """Return the active token for a presented string, or raise AuthenticationFailed."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or not parts[2]:
        raise exceptions.AuthenticationFailed("malformed API token", code="token_malformed")
    token = ApiToken.objects.select_related("user").filter(prefix=parts[1]).first()
    if token is None or not hmac.compare_digest(token.secret_hash, hash_token_secret(parts[2])):
        raise exceptions.AuthenticationFailed("unknown API token", code="token_unknown")
    if token.revoked_at is not None:
        raise exceptions.AuthenticationFailed("API token revoked", code="token_revoked")
    now = timezone.now()
    if token.expires_at is not None and token.expires_at <= now:
        raise exceptions.AuthenticationFailed("API token expired", code="token_expired")
    if not token.user.is_active:
        raise exceptions.AuthenticationFailed("user inactive", code="user_inactive")
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_GRANULARITY:
        # Not audited: bookkeeping, not a mutation anyone asked for; throttled to one write/min.
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() not in {"bearer", "token"}:
            return None
        try:
            if not raw.strip():
                raise exceptions.AuthenticationFailed("empty API token", code="token_malformed")
            token = resolve_token(raw.strip())
        except exceptions.AuthenticationFailed:
            # A wrong token counts against the address like a request without credentials: guessing
            # tokens is throttled (429 + Retry-After once the "anon" rate is spent).
            check_anonymous(request._request)
            raise
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Documents the bearer token in the OpenAPI schema."""

    target_class = "console.tenancy.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "ibc_<prefix>_<secret>"}
