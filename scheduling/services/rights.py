"""Who may change a reservation: the member who made it, any admin of its tenant, operators.

Everyone in a tenant reads all of the tenant's reservations (the queryset scoping does that);
changing one (extend, release, cancel) is narrower:

* a tenant member changes only the reservations they made themselves;
* a tenant admin changes any reservation of their tenant;
* an operator changes any reservation; an auditor or a read-only token changes none.

A member who tries another member's reservation gets 403: the reservation is visible to them
(same tenant), so "not found" would be a lie; another tenant's reservation stays 404 because it
is never visible. The check lives here, called by every lifecycle service, so the API, the pages
and the CLI answer alike.
"""

from __future__ import annotations

from console.tenancy.errors import Forbidden
from console.tenancy.models import Principal, Role
from scheduling.models import Reservation


def can_manage(principal: Principal, reservation: Reservation) -> bool:
    """True when ``principal`` may extend, release or cancel ``reservation``."""
    if not principal.can_write:
        return False
    if principal.is_operator:
        return True
    if principal.tenant_id is None or reservation.tenant_id != principal.tenant_id:
        return False
    if principal.role == Role.TENANT_ADMIN:
        return True
    mine = principal.user_id is not None and reservation.created_by_id == principal.user_id
    return principal.role == Role.TENANT_MEMBER and mine


def check_manage(principal: Principal, reservation: Reservation) -> None:
    """Refuse (403) whoever :func:`can_manage` refuses, saying why."""
    if not principal.can_write:
        raise Forbidden("read-only access: this action changes data")
    if not principal.is_operator and reservation.tenant_id != principal.tenant_id:
        raise Forbidden("not your reservation")
    if not can_manage(principal, reservation):
        raise Forbidden("a tenant member changes only the reservations they made; ask a tenant admin")
