"""Sign-in through an OpenID Connect provider (``mozilla-django-oidc``): the authorization-code
flow, the user named by a claim (``CONSOLE_OIDC_USERNAME_CLAIM``, default ``preferred_username``),
their role from their groups claim (``CONSOLE_OIDC_GROUPS_CLAIM``, default ``groups``, mapped by
``CONSOLE_OIDC_ROLES``) at every sign-in (console.tenancy.sso). A user the mapping gives no role is
refused; local accounts stay for break-glass."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import Http404, HttpRequest, HttpResponse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from console.tenancy.sso import DirectoryRefused, role_for, sync_membership

log = logging.getLogger(__name__)


def _groups(claims: dict[str, Any]) -> list[str]:
    value = claims.get(settings.CONSOLE_OIDC_GROUPS_CLAIM) or []
    return [value] if isinstance(value, str) else [str(g) for g in value]


def _username(claims: dict[str, Any]) -> str:
    return str(claims.get(settings.CONSOLE_OIDC_USERNAME_CLAIM) or "")[:150]


class OidcBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend: users by the username claim, roles from the groups claim."""

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        if not _username(claims):
            log.warning("OIDC sign-in refused: no %r claim", settings.CONSOLE_OIDC_USERNAME_CLAIM)
            return False
        try:
            role_for(_groups(claims), settings.CONSOLE_OIDC_ROLES)
        except DirectoryRefused as exc:
            log.warning("OIDC sign-in of %s refused: %s", _username(claims), exc)
            return False
        return True

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return get_user_model().objects.filter(username=_username(claims))

    def create_user(self, claims: dict[str, Any]) -> Any:
        user = get_user_model().objects.create_user(_username(claims), email=str(claims.get("email") or ""))
        return self.update_user(user, claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        role, tenant = role_for(_groups(claims), settings.CONSOLE_OIDC_ROLES)
        sync_membership(user, role, tenant, source="sso")
        return user


def _configured() -> None:
    if not settings.CONSOLE_OIDC_CLIENT_ID:
        raise Http404("no OpenID Connect provider is configured")


class AuthenticateView(OIDCAuthenticationRequestView):
    """/oidc/authenticate/: to the provider; 404 when none is configured."""

    def get(self, request: HttpRequest) -> HttpResponse:
        _configured()
        return super().get(request)


class CallbackView(OIDCAuthenticationCallbackView):
    """/oidc/callback/: the provider's redirect back; 404 when none is configured."""

    def get(self, request: HttpRequest) -> HttpResponse:
        _configured()
        return super().get(request)
