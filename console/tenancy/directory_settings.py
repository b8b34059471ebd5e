"""django-auth-ldap's settings from the console's environment variables (read by console.settings
when ``CONSOLE_LDAP_URL`` is set; docs/operations.md, "Single sign-on: LDAP")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def ldap_settings(env: Mapping[str, str]) -> dict[str, Any]:
    import ldap
    from django_auth_ldap.config import GroupOfNamesType, LDAPSearch, PosixGroupType

    group_types = {"groupOfNames": GroupOfNamesType, "posixGroup": PosixGroupType}
    kind = env.get("CONSOLE_LDAP_GROUP_TYPE", "groupOfNames")
    if kind not in group_types:
        raise ValueError(f"CONSOLE_LDAP_GROUP_TYPE must be one of {', '.join(group_types)}, not {kind!r}")
    object_class = "posixGroup" if kind == "posixGroup" else "groupOfNames"
    out: dict[str, Any] = {
        "AUTH_LDAP_SERVER_URI": env["CONSOLE_LDAP_URL"],
        "AUTH_LDAP_BIND_DN": env.get("CONSOLE_LDAP_BIND_DN", ""),
        "AUTH_LDAP_BIND_PASSWORD": env.get("CONSOLE_LDAP_BIND_PASSWORD", ""),
        "AUTH_LDAP_START_TLS": env.get("CONSOLE_LDAP_START_TLS", "").lower() in ("1", "true", "yes"),
        "AUTH_LDAP_USER_SEARCH": LDAPSearch(
            env["CONSOLE_LDAP_USER_BASE"], ldap.SCOPE_SUBTREE, env.get("CONSOLE_LDAP_USER_FILTER", "(uid=%(user)s)")
        ),
        "AUTH_LDAP_GROUP_SEARCH": LDAPSearch(
            env["CONSOLE_LDAP_GROUP_BASE"], ldap.SCOPE_SUBTREE, f"(objectClass={object_class})"
        ),
        "AUTH_LDAP_GROUP_TYPE": group_types[kind](),
        "AUTH_LDAP_USER_ATTR_MAP": {"first_name": "givenName", "last_name": "sn", "email": "mail"},
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        "AUTH_LDAP_CONNECTION_OPTIONS": {ldap.OPT_NETWORK_TIMEOUT: 5, ldap.OPT_TIMEOUT: 10},
    }
    return out
