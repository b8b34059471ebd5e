"""Roles from the company directory, for both ways of signing in with it: LDAP
(console.tenancy.directory) and OpenID Connect (console.tenancy.oidc). The directory's groups
decide a user's role and tenant at every sign-in; local accounts stay for break-glass.

A mapping (``CONSOLE_LDAP_ROLES``, ``CONSOLE_OIDC_ROLES``) gives each group a role: ``operator``,
``auditor``, ``tenant-admin:<tenant slug>`` or ``tenant-member:<tenant slug>``. The strongest
role wins (operator, auditor, tenant admin, tenant member); a user whose groups map to nothing,
or to two tenants at the same strength, is refused (and told nothing more than a wrong password
would be). The membership is written (and audited) only when it changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.models import Membership, Role, Tenant

STRENGTH = (Role.OPERATOR, Role.AUDITOR, Role.TENANT_ADMIN, Role.TENANT_MEMBER)


class DirectoryRefused(ValueError):
    """The directory's groups give no role, or an ambiguous one."""


def parse_role(value: str) -> tuple[str, str | None]:
    """``tenant-admin:aurora`` → (role, tenant slug); ``operator`` → (role, None)."""
    role, _, tenant = value.strip().partition(":")
    if role not in STRENGTH:
        raise ValueError(f"unknown role {role!r} in the directory's role mapping: {', '.join(STRENGTH)}")
    if (role in (Role.TENANT_ADMIN, Role.TENANT_MEMBER)) != bool(tenant):
        raise ValueError(f"{value!r}: tenant roles name a tenant (tenant-admin:<slug>), global roles none")
    return role, tenant or None


def role_for(groups: Iterable[str], mapping: Mapping[str, str]) -> tuple[str, str | None]:
    """The role (and tenant slug) a user in ``groups`` gets; group names compare case-insensitively."""
    wanted = {dn.lower(): parse_role(v) for dn, v in mapping.items()}
    found = {wanted[g.lower()] for g in groups if g.lower() in wanted}
    for role in STRENGTH:
        at = {t for r, t in found if r == role}
        if len(at) > 1:
            raise DirectoryRefused(f"groups give {role} in several tenants: {', '.join(sorted(map(str, at)))}")
        if at:
            return role, at.pop()
    raise DirectoryRefused("no group of the user maps to a role")


def sync_membership(user: Any, role: str, tenant_slug: str | None, *, source: str) -> Membership:
    """The user's membership as the directory says, written and audited only when it changes
    (the audit's actor is ``source``: directory, sso)."""
    tenant = Tenant.objects.filter(slug=tenant_slug).first() if tenant_slug else None
    if tenant_slug and tenant is None:
        raise DirectoryRefused(f"tenant {tenant_slug!r} of the role mapping does not exist")
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
        after = {"role": role, "tenant": tenant.pk if tenant else None, "source": source}
        action = "member.update" if before else "member.create"
        audit.record(Actor.system(source), action, row, before=before, after=after)
    return row
