"""Granting a placement: P_Keys per subnet, service levels, allocation rows, audit, reconcile.

One path for a direct reservation (:mod:`.reservations`) and a queued one the queue pass places
(:mod:`.queue`): both end in :func:`grant`, under the caller's locks (quota rows, then the
reservation lock).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from console.fabric.models import Fabric, FabricPartition, FabricQos
from console.fabric.services import KeySpace, allocate_pkeys, enqueue_reconcile
from console.tenancy import audit
from console.tenancy.context import Actor
from scheduling.models import Reservation, ReservationSubnet, ServiceLevels
from scheduling.placement import Placement
from scheduling.placement.powerfit import NodePower
from scheduling.services import power
from scheduling.services.pool_reads import facts_columns
from scheduling.services.quotas import sl_for
from scheduling.services.raw import insert_of, prepared_cursor
from scheduling.services.snapshots import write_allocations
from scheduling.services.topology import NamedTopology


@dataclass(frozen=True, slots=True)
class FabricFacts:
    """What a grant reads of one fabric it places on."""

    #: its P_Key range, the P_Keys live on it (of every reservation's subnets) and its other partitions'
    keys: KeySpace
    #: SLs per class (training, inference, best effort); None: no row, the defaults
    levels: tuple[int, int, int] | list[int] | None
    #: the fabric's QoS table (None: none saved)
    qos_table: Any


def placement_fabrics(named: NamedTopology, placement: Placement, home: int) -> list[int]:
    """The fabrics of the placement's nodes, the one holding most of them first (ties: the pool's
    ``home`` fabric, then the lowest pk); ``[home]`` when the topology does not say."""
    if not named.node_fabric:
        return [home]
    counts = Counter(named.node_fabric[node] for node in placement.node_ids)
    return sorted(counts, key=lambda f: (-counts[f], f != home, f))


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
    fabric: Sequence[Any] | None = None,
    new_id: int | None = None,
) -> Reservation:
    """Record ``placement`` for ``reservation`` (placed, or provisioning when it starts now):
    a free P_Key on each fabric its nodes are on (the same value on all where the ranges allow:
    :func:`~console.fabric.services.allocate_pkeys`), the SL of its priority class on each, one allocation per GPU over the
    placement's window (``window`` when the caller has it exact); audited as ``action`` and
    followed by a reconcile of each fabric after commit. ``reservation.fabric`` becomes the
    fabric holding most of its nodes (its ``pkey`` and ``sl`` are that fabric's).
    ``node_power``: the pool's nodes that are not on (engine index), when the caller read them
    under the reservation lock (:attr:`.snapshots.Snapshot.power`); ``fabric``: what the grant
    reads of the pool's fabric when the caller read it under that lock
    (:attr:`.snapshots.Snapshot.fabric`), read here otherwise (and for other fabrics);
    ``new_id``: the id of a new reservation (:attr:`.snapshots.Snapshot.reservation_id`): its
    row and its audit row are then inserted in the allocations' statement."""
    pool = reservation.pool
    before = audit.snapshot(reservation) if reservation.pk else None
    fabrics = placement_fabrics(named, placement, pool.fabric_id)
    read = {} if fabric is None else {fabric[0]: fabric_facts_of(fabric)}
    facts = read if set(fabrics) <= set(read) else _fabric_facts(fabrics)
    pkeys = allocate_pkeys([facts[f].keys for f in fabrics])
    sls = {f: sl_for(facts[f].qos_table, facts[f].levels, reservation.priority_class) for f in fabrics}
    start, end = window or (
        dt.datetime.fromtimestamp(placement.start, dt.UTC),
        dt.datetime.fromtimestamp(placement.end, dt.UTC),
    )
    home = fabrics[0]
    reservation.fabric_id = home
    reservation.start, reservation.end = start, end
    reservation.status = Reservation.Status.PROVISIONING if start <= now else Reservation.Status.PLACED
    reservation.gpus = placement.gpus
    reservation.pkey = pkeys[home]
    reservation.pkey_live = True
    reservation.sl = sls[home]
    reservation.placement = named.describe(placement)
    waits_for, wake = power.grant_note(named, placement, now, power=node_power)  # nodes not on yet: booted
    if waits_for is not None:
        reservation.placement["power"] = waits_for
    inserts: list[tuple[str, list[Any]]] = []
    if new_id is not None and reservation.pk is None:  # one statement with the allocations
        reservation.pk = new_id
        inserts.append(insert_of(reservation))  # first: sets created_at and updated_at
    else:
        reservation.save()
    power.wake_at_grant(wake, reservation.pk)
    # The subnet rows go in with the allocations (one statement on PostgreSQL): a concurrent
    # grant that picked the same live P_Key of a fabric fails there (subnet_pkey_live_unique)
    # and the reserve path retries with the keys read anew.
    if inserts:
        after = audit.snapshot(reservation)
        inserts.append(insert_of(audit.record(actor, action, reservation, before=before, after=after, save=False)))
        reservation._state.adding, reservation._state.db = False, connection.alias  # saved below
    write_allocations(
        reservation.pk,
        (
            (named.node_pks[node], named.gpu_pks[(node, index)])
            for node, indices in zip(placement.node_ids, placement.gpu_indices, strict=True)
            for index in indices
        ),
        start,
        end,
        subnets=[(f, pkeys[f], sls[f]) for f in fabrics],
        inserts=inserts,
    )
    if not inserts:
        audit.record(actor, action, reservation, before=before, after=audit.snapshot(reservation))
    for fabric_id in fabrics:
        enqueue_reconcile(fabric_id)
    return reservation


def _fabric_facts(fabric_ids: Sequence[int]) -> dict[int, FabricFacts]:
    """What a grant reads of each fabric: its P_Key range, the live P_Keys on it (of every
    reservation's subnets), the P_Keys of its partitions of other sources, its SLs per priority
    class and its QoS table; one statement on PostgreSQL, whatever the number of fabrics."""
    if connection.vendor != "postgresql":
        return fabric_facts_row_by_row(fabric_ids)
    fabrics = connection.ops.quote_name(Fabric._meta.db_table)
    # The QoS rows FOR SHARE in fabric order: two grants spanning the same fabrics take them in
    # the same order.
    sql = f"SELECT {facts_columns()} FROM {fabrics} f WHERE f.id = ANY(%(f)s) ORDER BY f.id"  # noqa: S608 - ours
    with prepared_cursor() as cursor:
        cursor.execute(sql, {"f": list(fabric_ids), "source": str(FabricPartition.Source.RESERVATION)})
        return {row[0]: fabric_facts_of(row) for row in cursor.fetchall()}


def fabric_facts_of(row: Sequence[Any]) -> FabricFacts:
    """:class:`FabricFacts` of one row of :func:`.pool_reads.facts_columns` (as a tuple, or as
    the JSON array :func:`.pool_reads.read_pool` reads it in)."""
    pk, name, low, high, held, others, sls, table = row
    if isinstance(table, str):  # Django has psycopg return jsonb as text (JSONField decodes it)
        table = json.loads(table)
    return FabricFacts(KeySpace(pk, name, low, high, frozenset((*(held or ()), *(others or ())))), sls, table)


def fabric_facts_row_by_row(fabric_ids: Sequence[int]) -> dict[int, FabricFacts]:
    """:func:`_fabric_facts` one query each (SQLite; the benchmark's in-run baseline)."""
    out = {}
    for pk, name, low, high in Fabric.objects.filter(pk__in=fabric_ids).values_list(
        "pk", "name", "pkey_min", "pkey_max"
    ):
        row = ServiceLevels.objects.filter(fabric_id=pk).values_list("training", "inference", "best_effort")
        table = FabricQos.objects.filter(fabric_id=pk).values_list("table", flat=True).first()
        others = (
            FabricPartition.objects.filter(fabric_id=pk)
            .exclude(source=FabricPartition.Source.RESERVATION)
            .values_list("pkey", flat=True)
        )
        out[pk] = FabricFacts(KeySpace(pk, name, low, high, frozenset((*live_pkeys(pk), *others))), row.first(), table)
    return out


def live_pkeys(fabric_id: int) -> set[int]:
    """P_Keys that may still be on the fabric's wire (``ReservationSubnet.pkey_live``), whichever
    reservation (single-fabric or spanning) holds them.

    Uniqueness among live keys is a database constraint (``subnet_pkey_live_unique``); a
    concurrent pick of the same key fails on insert and the reserve path retries.
    """
    return set(ReservationSubnet.objects.filter(fabric_id=fabric_id, pkey_live=True).values_list("pkey", flat=True))
