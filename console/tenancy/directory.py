"""Sign-in through the company directory (LDAP, ``django-auth-ldap``): a directory user's groups
decide their role and tenant on every sign-in; local accounts stay for break-glass.

``CONSOLE_LDAP_ROLES`` maps group DNs to a role: ``operator``, ``auditor``,
``tenant-admin:<tenant slug>`` or ``tenant-member:<tenant slug>``. The strongest role wins
(operator, auditor, tenant admin, tenant member); a user whose groups map to nothing, or to two
tenants at the same strength, is refused (and told nothing more than a wrong password would be).
The membership is written (and audited) only when it changes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django_auth_ldap.backend import LDAPBackend

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.models import Membership, Role, Tenant

log = logging.getLogger(__name__)

STRENGTH = (Role.OPERATOR, Role.AUDITOR, Role.TENANT_ADMIN, Role.TENANT_MEMBER)


class DirectoryRefused(ValueError):
    """The directory's groups give no role, or an ambiguous one."""


def parse_role(value: str) -> tuple[str, str | None]:
    """``tenant-admin:aurora`` → (role, tenant slug); ``operator`` → (role, None)."""
    role, _, tenant = value.strip().partition(":")
    if role not in STRENGTH:
        raise ValueError(f"unknown role {role!r} in CONSOLE_LDAP_ROLES: {', '.join(STRENGTH)}")
    if (role in (Role.TENANT_ADMIN, Role.TENANT_MEMBER)) != bool(tenant):
        raise ValueError(f"{value!r}: tenant roles name a tenant (tenant-admin:<slug>), global roles none")
    return role, tenant or None


def role_for(groups: Iterable[str], mapping: Mapping[str, str]) -> tuple[str, str | None]:
    """The role (and tenant slug) a user in ``groups`` gets; DNs compare case-insensitively."""
    wanted = {dn.lower(): parse_role(v) for dn, v in mapping.items()}
    found = {wanted[g.lower()] for g in groups if g.lower() in wanted}
    for role in STRENGTH:
        at = {t for r, t in found if r == role}
        if len(at) > 1:
            raise DirectoryRefused(f"groups give {role} in several tenants: {', '.join(sorted(map(str, at)))}")
        if at:
            return role, at.pop()
    raise DirectoryRefused("no group of the user maps to a role")


def sync_membership(user: Any, role: str, tenant_slug: str | None) -> Membership:
    """The user's membership as the directory says, written and audited only when it changes."""
    tenant = Tenant.objects.filter(slug=tenant_slug).first() if tenant_slug else None
    if tenant_slug and tenant is None:
        raise DirectoryRefused(f"tenant {tenant_slug!r} of CONSOLE_LDAP_ROLES does not exist")
    actor = Actor.system("directory")
    with transaction.atomic():
        row = Membership.objects.select_for_update().filter(user=user).first()
        if row is not None and row.role == role and row.tenant_id == (tenant.pk if tenant else None):
            return row
        before = {"role": row.role, "tenant": row.tenant_id} if row else None
        if row is None:
            row = Membership.objects.create(user=user, role=role, tenant=tenant)
        else:
            row.role, row.tenant = role, tenant
            row.save(update_fields=["role", "tenant"])
        after = {"role": role, "tenant": tenant.pk if tenant else None, "source": "directory"}
        audit.record(actor, "member.update" if before else "member.create", row, before=before, after=after)
    return row


class DirectoryBackend(LDAPBackend):
    """django-auth-ldap's backend, with the role taken from the user's groups at each sign-in."""

    def authenticate_ldap_user(self, ldap_user: Any, password: str) -> Any:
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is None:
            return None
        from django.conf import settings

        try:
            role, tenant = role_for(ldap_user.group_dns, settings.CONSOLE_LDAP_ROLES)
            sync_membership(user, role, tenant)
        except DirectoryRefused as exc:
            log.warning("directory sign-in of %s refused: %s", user.get_username(), exc)
            return None
        return user
