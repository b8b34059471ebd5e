"""Single-sign-on settings from the environment (docs/operations.md, "Single sign-on"): an LDAP
directory (console.tenancy.directory, the ``ldap`` extra) and an OpenID Connect provider
(console.tenancy.oidc, mozilla-django-oidc). console.settings imports them and puts the backends
before the local accounts."""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = [
    "CONSOLE_LDAP_ROLES",
    "CONSOLE_LDAP_URL",
    "CONSOLE_OIDC_CLIENT_ID",
    "CONSOLE_OIDC_GROUPS_CLAIM",
    "CONSOLE_OIDC_NAME",
    "CONSOLE_OIDC_ROLES",
    "CONSOLE_OIDC_USERNAME_CLAIM",
    "LOGIN_REDIRECT_URL_FAILURE",
    "OIDC_AUTHENTICATE_CLASS",
    "OIDC_CALLBACK_CLASS",
    "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_JWKS_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT",
    "OIDC_RP_CLIENT_ID",
    "OIDC_RP_CLIENT_SECRET",
    "OIDC_RP_SCOPES",
    "OIDC_RP_SIGN_ALGO",
    "BACKENDS",
]

# Sign-in through an LDAP directory (console.tenancy.directory, the `ldap` extra): before the
# local accounts, which stay for break-glass. CONSOLE_LDAP_ROLES: JSON, group DN -> role.
CONSOLE_LDAP_URL = os.environ.get("CONSOLE_LDAP_URL", "")
CONSOLE_LDAP_ROLES: dict[str, str] = json.loads(os.environ.get("CONSOLE_LDAP_ROLES", "{}") or "{}")

# Sign-in through an OpenID Connect provider (console.tenancy.oidc, mozilla-django-oidc): the
# provider's endpoints and this console's client; CONSOLE_OIDC_ROLES: JSON, group -> role.
CONSOLE_OIDC_CLIENT_ID = os.environ.get("CONSOLE_OIDC_CLIENT_ID", "")
CONSOLE_OIDC_NAME = os.environ.get("CONSOLE_OIDC_NAME", "single sign-on")
CONSOLE_OIDC_ROLES: dict[str, str] = json.loads(os.environ.get("CONSOLE_OIDC_ROLES", "{}") or "{}")
CONSOLE_OIDC_GROUPS_CLAIM = os.environ.get("CONSOLE_OIDC_GROUPS_CLAIM", "groups")
CONSOLE_OIDC_USERNAME_CLAIM = os.environ.get("CONSOLE_OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_RP_CLIENT_ID = CONSOLE_OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = os.environ.get("CONSOLE_OIDC_CLIENT_SECRET", "")
OIDC_RP_SIGN_ALGO = os.environ.get("CONSOLE_OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = os.environ.get("CONSOLE_OIDC_SCOPES", "openid email profile groups")
OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("CONSOLE_OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.environ.get("CONSOLE_OIDC_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.environ.get("CONSOLE_OIDC_USERINFO_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = os.environ.get("CONSOLE_OIDC_JWKS_ENDPOINT", "")
OIDC_AUTHENTICATE_CLASS = "console.tenancy.oidc.AuthenticateView"
OIDC_CALLBACK_CLASS = "console.tenancy.oidc.CallbackView"
LOGIN_REDIRECT_URL_FAILURE = "/login/?sso=refused"

#: The sign-in backends these settings turn on, in order, before the local accounts.
BACKENDS = [
    *(["console.tenancy.oidc.OidcBackend"] if CONSOLE_OIDC_CLIENT_ID else []),
    *(["console.tenancy.directory.DirectoryBackend"] if CONSOLE_LDAP_URL else []),
]


def ldap_django_settings() -> dict[str, Any]:
    """django-auth-ldap's settings (``AUTH_LDAP_*``) when a directory is configured, else none."""
    if not CONSOLE_LDAP_URL:
        return {}
    from console.tenancy.directory_settings import ldap_settings

    return ldap_settings(os.environ)
