"""Sign-in through an LDAP directory (``django-auth-ldap``, the ``ldap`` extra): the user binds
with their own password, their groups (``CONSOLE_LDAP_ROLES``) give their role at every sign-in
(console.tenancy.sso); local accounts stay for break-glass."""

from __future__ import annotations

import logging
from typing import Any

from django_auth_ldap.backend import LDAPBackend

from console.tenancy.sso import DirectoryRefused, role_for, sync_membership

log = logging.getLogger(__name__)


class DirectoryBackend(LDAPBackend):
    """django-auth-ldap's backend, with the role taken from the user's groups at each sign-in."""

    def authenticate_ldap_user(self, ldap_user: Any, password: str) -> Any:
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is None:
            return None
        from django.conf import settings

        try:
            role, tenant = role_for(ldap_user.group_dns, settings.CONSOLE_LDAP_ROLES)
            sync_membership(user, role, tenant, source="directory")
        except DirectoryRefused as exc:
            log.warning("directory sign-in of %s refused: %s", user.get_username(), exc)
            return None
        return user
