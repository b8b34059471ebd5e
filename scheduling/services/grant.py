"""Granting a placement: P_Key, service level, allocation rows, audit, reconcile.

One path for a direct reservation (:mod:`.reservations`) and a queued one the queue pass places
(:mod:`.queue`): both end in :func:`grant`, under the caller's locks (quota rows, then nodes).
"""

from __future__ import annotations

import datetime as dt

from console.fabric.services import allocate_pkey, enqueue_reconcile
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict
from scheduling.models import Reservation, ReservationAllocation
from scheduling.placement import Placement
from scheduling.services import power
from scheduling.services.quotas import service_level
from scheduling.services.snapshots import touch
from scheduling.services.topology import NamedTopology


def grant(
    actor: Actor,
    reservation: Reservation,
    named: NamedTopology,
    placement: Placement,
    *,
    now: dt.datetime,
    action: str,
    window: tuple[dt.datetime, dt.datetime] | None = None,
) -> Reservation:
    """Record ``placement`` for ``reservation`` (placed, or provisioning when it starts now):
    a free P_Key of its fabric, the SL of its priority class, one allocation per GPU over the
    placement's window (``window`` when the caller has it exact); audited as ``action`` and followed by a reconcile after commit."""
    pool = reservation.pool
    before = audit.snapshot(reservation) if reservation.pk else None
    pkey = allocate_pkey(pool.fabric, held=live_pkeys(pool.fabric_id))
    if pkey is None:
        raise Conflict(
            f"fabric {pool.fabric} has no free P_Key in 0x{pool.fabric.pkey_min:04x}..0x{pool.fabric.pkey_max:04x}",
            code="no_pkey",
        )
    start, end = window or (
        dt.datetime.fromtimestamp(placement.start, dt.UTC),
        dt.datetime.fromtimestamp(placement.end, dt.UTC),
    )
    reservation.start, reservation.end = start, end
    reservation.status = Reservation.Status.PROVISIONING if start <= now else Reservation.Status.PLACED
    reservation.gpus = placement.gpus
    reservation.pkey = pkey
    reservation.pkey_live = True
    reservation.sl = service_level(pool.fabric_id, reservation.priority_class)
    reservation.placement = named.describe(placement)
    waits_for, wake = power.grant_note(named, placement, now)  # nodes not on yet: booted (power_wanted)
    if waits_for is not None:
        reservation.placement["power"] = waits_for
    reservation.save()
    power.wake_at_grant(wake, reservation.pk)
    ReservationAllocation.objects.bulk_create(
        [
            ReservationAllocation(
                reservation=reservation,
                node_id=named.node_pks[node],
                gpu_id=named.gpu_pks[(node, index)],
                start=start,
                end=end,
            )
            for node, indices in zip(placement.node_ids, placement.gpu_indices, strict=True)
            for index in indices
        ],
        batch_size=2000,
    )
    touch((named.node_pks[node] for node in placement.node_ids), [reservation.pk])
    audit.record(actor, action, reservation, before=before, after=audit.snapshot(reservation))
    enqueue_reconcile(pool.fabric_id)
    return reservation


def live_pkeys(fabric_id: int) -> set[int]:
    """P_Keys of the fabric's reservations that may still be on the wire (``pkey_live``).

    Uniqueness among live reservations is a database constraint; a concurrent pick of the same
    key fails on insert and the reserve path retries.
    """
    return set(Reservation.objects.filter(fabric_id=fabric_id, pkey_live=True).values_list("pkey", flat=True))
