"""Virtual port GUIDs (pod VFs) a reservation's tenant puts on the reservation's P_Key.

Each reservation owns a range of virtual GUIDs (:func:`console.fabric.services.vguid_range`, the
pool its ib-kubernetes allocates VF GUIDs from). Only the reservation's own tenant adds or removes
them, only GUIDs inside that range, and only while the reservation holds its nodes; the next
change of the fabric carries them as members of the reservation's partition
(:func:`scheduling.services.lifecycle.desired_partitions`). Audited in the transaction that writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from django.db import transaction

from console.fabric.opensm.lint import format_guid
from console.fabric.services import vguid_range
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError, Forbidden
from console.tenancy.models import Principal
from console.tenancy.throttling import ConsoleRateThrottle
from scheduling.models import Reservation
from scheduling.services.locks import reservation_for_update
from scheduling.services.rights import check_manage


class TooManyWrites(ConsoleError):
    """A tenant changed its virtual GUIDs faster than ``CONSOLE_THROTTLE_RATES["vguid"]``."""

    status = 429
    code = "throttled"


class TenantWriteThrottle(ConsoleRateThrottle):
    """Virtual-GUID writes (each one a change of the fabric) per tenant, whichever way they come
    (the REST API, ``/ufmRest/``, the CLI): ``CONSOLE_THROTTLE_RATES["vguid"]``."""

    scope = "vguid"

    def __init__(self, tenant_id: int) -> None:
        self.tenant_id = tenant_id
        super().__init__()

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": f"tenant-{self.tenant_id}"}


def _count_write(tenant_id: int) -> None:
    """Count one effective write of the tenant; TooManyWrites (429, Retry-After) past its rate."""
    throttle = TenantWriteThrottle(tenant_id)
    if not throttle.allow_request(cast(Any, None), cast(Any, None)):
        wait = int(throttle.wait() or 1)
        error = TooManyWrites(f"too many virtual GUID changes for this tenant; retry in {wait} s")
        error.retry_after = wait
        raise error


def outside_range(reservation_id: int, guids: Iterable[int]) -> list[int]:
    """The GUIDs of ``guids`` that are not in the reservation's vGUID range."""
    owned = vguid_range(reservation_id)
    return [g for g in guids if owned is None or g not in owned]


def change_virtual_guids(
    actor: Actor,
    principal: Principal,
    reservation_id: int,
    *,
    add: Mapping[int, str] | None = None,
    remove: Iterable[int] = (),
) -> bool:
    """Add (GUID → full|limited) and remove virtual GUIDs of the reservation; True if anything changed.

    Raises Forbidden for anyone but the reservation's tenant (with write access), and within it
    for whoever may not change the reservation (:func:`scheduling.services.rights.check_manage`:
    a member changes only the reservations they made, an admin any of the tenant's: the rule of
    extend and release, whether the call comes through the REST API or ``/ufmRest/``), for a GUID
    outside the reservation's range, or when the reservation no longer holds its nodes.
    """
    add = dict(add or {})
    if not principal.can_write or principal.tenant_id is None:
        raise Forbidden("only the reservation's tenant adds its pods' virtual GUIDs")
    foreign = outside_range(reservation_id, add)
    if foreign:
        raise Forbidden(
            f"{', '.join(format_guid(g) for g in foreign[:8])} outside reservation {reservation_id}'s range"
        )
    with transaction.atomic():
        res = reservation_for_update(reservation_id)
        if res.tenant_id != principal.tenant_id:
            raise Forbidden("only the reservation's tenant adds its pods' virtual GUIDs")
        check_manage(principal, res)
        if res.status not in Reservation.HOLDING:
            raise Forbidden(f"reservation {res.pk} is {res.status}: its P_Key takes no new members")
        before = [list(m) for m in res.virtual_guids or []]
        current = {int(g, 16): m for g, m in before}
        gone = set(remove)
        current = {g: m for g, m in current.items() if g not in gone}
        current.update(add)
        after = [[format_guid(g), m] for g, m in sorted(current.items())]
        if after == sorted(before):
            return False
        _count_write(res.tenant_id)
        res.virtual_guids = after
        res.save(update_fields=["virtual_guids", "updated_at"])
        audit.record(
            actor,
            "reservation.virtual_guids",
            res,
            before={"virtual_guids": before},
            after={"virtual_guids": after},
            tenant_id=res.tenant_id,
        )
    return True
