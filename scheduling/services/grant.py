"""Granting a placement: P_Key, service level, allocation rows, audit, reconcile.

One path for a direct reservation (:mod:`.reservations`) and a queued one the queue pass places
(:mod:`.queue`): both end in :func:`grant`, under the caller's locks (quota rows, then the
reservation lock).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django.db import connection

from console.fabric.models import FabricPartition, FabricQos
from console.fabric.services import allocate_pkey, enqueue_reconcile
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict
from scheduling.models import Reservation, ServiceLevels
from scheduling.placement import Placement
from scheduling.placement.powerfit import NodePower
from scheduling.services import power
from scheduling.services.quotas import sl_for
from scheduling.services.snapshots import write_allocations
from scheduling.services.topology import NamedTopology, placed_fabric

#: live P_Keys, other partitions' P_Keys (None: not read), SLs per class (None: no row), QoS table
FabricFacts = tuple[set[int], list[int] | None, tuple[int, int, int] | list[int] | None, Any]


def grant(
    actor: Actor,
    reservation: Reservation,
    named: NamedTopology,
    placement: Placement,
    *,
    now: dt.datetime,
    action: str,
    window: tuple[dt.datetime, dt.datetime] | None = None,
    node_power: dict[int, NodePower] | None = None,
) -> Reservation:
    """Record ``placement`` for ``reservation`` (placed, or provisioning when it starts now):
    a free P_Key of its fabric, the SL of its priority class, one allocation per GPU over the
    placement's window (``window`` when the caller has it exact); audited as ``action`` and followed by a reconcile after commit.
    ``node_power``: the pool's nodes that are not on (engine index), when the caller read them
    under the reservation lock (:attr:`.snapshots.Snapshot.power`)."""
    before = audit.snapshot(reservation) if reservation.pk else None
    # The fabric of the placed nodes (a pool's nodes may be on several fabrics: sites).
    fabric = reservation.fabric = placed_fabric(reservation.pool, named, placement)
    held, others, levels, qos_table = _fabric_facts(fabric.pk)
    pkey = allocate_pkey(fabric, held=held, others=others)
    if pkey is None:
        raise Conflict(
            f"fabric {fabric} has no free P_Key in 0x{fabric.pkey_min:04x}..0x{fabric.pkey_max:04x}",
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
    reservation.sl = sl_for(qos_table, levels, reservation.priority_class)
    reservation.placement = named.describe(placement)
    waits_for, wake = power.grant_note(named, placement, now, power=node_power)  # nodes not on yet: booted
    if waits_for is not None:
        reservation.placement["power"] = waits_for
    reservation.save()
    power.wake_at_grant(wake, reservation.pk)
    write_allocations(
        reservation.pk,
        (
            (named.node_pks[node], named.gpu_pks[(node, index)])
            for node, indices in zip(placement.node_ids, placement.gpu_indices, strict=True)
            for index in indices
        ),
        start,
        end,
    )
    audit.record(actor, action, reservation, before=before, after=audit.snapshot(reservation))
    enqueue_reconcile(fabric.pk)
    return reservation


def _fabric_facts(fabric_id: int) -> FabricFacts:
    """What a grant reads of its fabric: the live P_Keys of its reservations, the P_Keys of its
    partitions of other sources (None: not read here), its SLs per priority class (None: no
    row, the defaults) and its QoS table (None: none saved); one statement on PostgreSQL instead
    of four."""
    if connection.vendor != "postgresql":
        return fabric_facts_row_by_row(fabric_id)
    reservations = connection.ops.quote_name(Reservation._meta.db_table)
    partitions = connection.ops.quote_name(FabricPartition._meta.db_table)
    levels = connection.ops.quote_name(ServiceLevels._meta.db_table)
    qos = connection.ops.quote_name(FabricQos._meta.db_table)
    sql = (
        f"SELECT (SELECT array_agg(pkey) FROM {reservations} WHERE fabric_id = %(f)s AND pkey_live),"  # noqa: S608
        f" (SELECT array_agg(pkey) FROM {partitions} WHERE fabric_id = %(f)s AND source <> %(source)s),"
        f" (SELECT json_build_array(training, inference, best_effort) FROM {levels} WHERE fabric_id = %(f)s),"
        # FOR SHARE: a QoS table change (console.fabric.changes.qos.set_qos_table) waits for this
        # grant to commit before it checks the SLs in use, and this grant waits for it
        f' (SELECT "table" FROM {qos} WHERE fabric_id = %(f)s FOR SHARE)'
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"f": fabric_id, "source": str(FabricPartition.Source.RESERVATION)})
        held, others, sls, table = cursor.fetchone()
    if isinstance(table, str):  # Django has psycopg return jsonb as text (JSONField decodes it)
        table = json.loads(table)
    return set(held or ()), list(others or ()), sls, table


def fabric_facts_row_by_row(fabric_id: int) -> FabricFacts:
    """:func:`_fabric_facts` one query each (SQLite; the benchmark's in-run baseline)."""
    row = ServiceLevels.objects.filter(fabric_id=fabric_id).values_list("training", "inference", "best_effort")
    table = FabricQos.objects.filter(fabric_id=fabric_id).values_list("table", flat=True).first()
    return live_pkeys(fabric_id), None, row.first(), table


def live_pkeys(fabric_id: int) -> set[int]:
    """P_Keys of the fabric's reservations that may still be on the wire (``pkey_live``).

    Uniqueness among live reservations is a database constraint; a concurrent pick of the same
    key fails on insert and the reserve path retries.
    """
    return set(Reservation.objects.filter(fabric_id=fabric_id, pkey_live=True).values_list("pkey", flat=True))
