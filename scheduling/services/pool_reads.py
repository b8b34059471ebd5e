"""What a cached pool snapshot re-reads on every lend, in one round trip on PostgreSQL.

:func:`read_pool` returns the pool's booking generation, the change rows since the cache's
generation with the allocation rows of the reservations they name, the nodes that are not
available or not on, the nodes with a failed GPU and the quotas' shaped guarantees. On PostgreSQL
it is one statement of scalar subqueries (one snapshot of the database, one round trip instead of
seven); elsewhere (SQLite) the same reads as ORM queries. The reserve path runs it under the
reservation lock (:func:`.locks.reservation_lock`), so what it reads stays true until commit.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Model

from console.fabric.models import Fabric, FabricPartition, FabricQos
from scheduling.models import (
    GPU,
    BookingChange,
    BookingGeneration,
    Node,
    Pool,
    Quota,
    Reservation,
    ReservationAllocation,
    ReservationSubnet,
    ServiceLevels,
)
from scheduling.services.raw import prepared_cursor

#: One allocation row: reservation, node pk, GPU index, start and end (epoch seconds), and the
#: reservation's tenant, borrowed flag and priority class.
AllocationRow = tuple[int, int, int, float, float, int, bool, str]
#: A reservation holding SHARP trees: id, pool, the switches of its trees, start and end (epoch).
SharpRow = tuple[int, int, list[str], float, float]


@dataclass
class PoolReads:
    generation: int
    #: (generation, reservation id) of the change rows after ``since``, up to ``generation``.
    changes: list[tuple[int, int]]
    #: Allocation rows ending after ``now`` of the reservations in ``changes``.
    rows: list[AllocationRow]
    #: Node pk -> state, of the pool's nodes that are not available.
    states: dict[int, str]
    #: Node pk -> (power state, epoch of its last change), of the pool's nodes that are not on.
    power: dict[int, tuple[str, float | None]]
    #: Pool nodes with a failed GPU.
    failed: set[int]
    #: Tenant id (text) -> leaf groups guaranteed whole.
    shaped: dict[str, int]
    #: The asked tenant's holding reservations in the pool ending after ``now``: (start, end) in
    #: epoch seconds and GPUs (its quota usage); None when no tenant was asked.
    held: list[tuple[float, float, int]] | None = None
    #: The holding reservations of the fabric asked for that hold SHARP trees: (id, pool id, the
    #: switches of its trees, start, end in epoch seconds); None when no fabric was asked.
    sharp: list[SharpRow] | None = None
    #: What a grant reads of the fabric asked for (:func:`facts_columns`), as one row; None when no fabric
    #: was asked (or on the one-per-read path: the grant reads it then).
    facts: tuple[Any, ...] | None = None
    #: With ``facts``: a reservation id taken from its sequence (the grant's new row).
    reservation_id: int | None = None


def read_pool(
    pool_id: int,
    since: int | None,
    now: dt.datetime,
    tenant_id: int | None = None,
    sharp_fabric: int | None = None,
    facts_fabric: int | None = None,
) -> PoolReads:
    """The pool's re-read state; ``since=None`` skips the changes (a full load follows);
    ``tenant_id``: the tenant's holdings too; ``sharp_fabric``: that fabric's SHARP holders too
    (:func:`.sharp.sharp_guard`); ``facts_fabric``: what a grant reads of that fabric too
    (:func:`facts_columns`, its QoS row FOR SHARE: reserve asks, under the reservation lock) and
    a reservation id from its sequence (the row reserve may insert)."""
    if connection.vendor == "postgresql":
        return _read_in_one(pool_id, since, now, tenant_id, sharp_fabric, facts_fabric)
    return read_row_by_row(pool_id, since, now, tenant_id, sharp_fabric, facts_fabric)


def facts_columns() -> str:
    """What a grant reads of fabric ``f`` (:func:`.grant._fabric_facts`): id, name, P_Key range,
    the live P_Keys of every reservation's subnets on it, the P_Keys of its partitions of other
    sources (``%(source)s``: the reservations'), its SLs per class and its QoS table, FOR SHARE (a
    QoS table change, ``console.fabric.changes.qos.set_qos_table``, waits for the grant to commit
    before it checks the SLs in use, and the grant waits for it)."""
    subnets, partitions = _table(ReservationSubnet), _table(FabricPartition)
    levels, qos = _table(ServiceLevels), _table(FabricQos)
    return (
        f"f.id, f.name, f.pkey_min, f.pkey_max,"  # noqa: S608 - the table names are ours
        f" (SELECT array_agg(pkey) FROM {subnets} WHERE fabric_id = f.id AND pkey_live),"
        f" (SELECT array_agg(pkey) FROM {partitions} WHERE fabric_id = f.id AND source <> %(source)s),"
        f" (SELECT json_build_array(training, inference, best_effort) FROM {levels} WHERE fabric_id = f.id),"
        f' (SELECT "table" FROM {qos} WHERE fabric_id = f.id FOR SHARE)'
    )


def _table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@functools.cache
def _statement() -> str:
    gen, changes, members = _table(BookingGeneration), _table(BookingChange), _table(Pool.nodes.through)
    alloc, gpu, res, node, quota = (
        _table(ReservationAllocation),
        _table(GPU),
        _table(Reservation),
        _table(Node),
        _table(Quota),
    )
    available, on, failed = Node.State.AVAILABLE, Node.Power.ON, GPU.Health.FAILED
    # The table names are ours and the three literals are model choices: nothing here is input.
    return (
        f"WITH g AS (SELECT generation FROM {gen} WHERE pool_id = %(pool)s),"  # noqa: S608
        f" c AS (SELECT generation, reservation_id FROM {changes} WHERE pool_id = %(pool)s"
        f" AND generation > %(since)s AND generation <= (SELECT generation FROM g))"
        f" SELECT (SELECT generation FROM g),"
        f" (SELECT json_agg(json_build_array(generation, reservation_id)) FROM c),"
        f" (SELECT json_agg(json_build_array(a.reservation_id, a.node_id, u.index, extract(epoch FROM a.start),"
        f' extract(epoch FROM a."end"), r.tenant_id, r.borrowed, r.priority_class))'
        f" FROM {alloc} a JOIN {gpu} u ON u.id = a.gpu_id JOIN {res} r ON r.id = a.reservation_id"
        f' WHERE a.reservation_id IN (SELECT reservation_id FROM c) AND a."end" > %(now)s),'
        f" (SELECT json_agg(json_build_array(n.id, n.state, n.power_state, extract(epoch FROM n.power_changed_at)))"
        f" FROM {node} n JOIN {members} m ON m.node_id = n.id"
        f" WHERE m.pool_id = %(pool)s AND (n.state <> '{available}' OR n.power_state <> '{on}')),"
        f" (SELECT json_agg(DISTINCT u.node_id) FROM {gpu} u JOIN {members} m ON m.node_id = u.node_id"
        f" WHERE m.pool_id = %(pool)s AND u.health = '{failed}'),"
        f" (SELECT json_agg(json_build_array(tenant_id, guaranteed_leaf_groups)) FROM {quota}"
        f" WHERE pool_id = %(pool)s AND guaranteed_leaf_groups > 0),"
        f' (SELECT json_agg(json_build_array(extract(epoch FROM start), extract(epoch FROM "end"), gpus)) FROM {res}'
        f' WHERE tenant_id = %(tenant)s AND pool_id = %(pool)s AND status = ANY(%(holding)s) AND "end" > %(now)s),'
        f" (SELECT json_agg(json_build_array(id, pool_id, placement -> 'sharp', extract(epoch FROM start),"
        f' extract(epoch FROM "end"))) FROM {res}'
        f" WHERE fabric_id = %(sharp)s AND status = ANY(%(holding)s) AND placement ? 'sharp'),"
        f" (SELECT json_build_array({facts_columns()}) FROM {_table(Fabric)} f WHERE f.id = %(facts)s),"
        f" (SELECT nextval(pg_get_serial_sequence('{res}', 'id')) WHERE %(facts)s > 0)"
    )


def _read_in_one(
    pool_id: int,
    since: int | None,
    now: dt.datetime,
    tenant_id: int | None,
    sharp_fabric: int | None,
    facts_fabric: int | None,
) -> PoolReads:
    skip = 2**62  # no change row is that new: the changes are not wanted
    params: dict[str, Any] = {
        "pool": pool_id,
        "since": skip if since is None else since,
        "now": now,
        "tenant": -1 if tenant_id is None else tenant_id,  # no tenant has that id
        "sharp": -1 if sharp_fabric is None else sharp_fabric,  # nor a fabric
        "facts": -1 if facts_fabric is None else facts_fabric,
        "source": str(FabricPartition.Source.RESERVATION),
        "holding": [str(status) for status in Reservation.HOLDING],  # values, not enum names
    }
    with prepared_cursor() as cursor:
        cursor.execute(_statement(), params)
        generation, changes, rows, nodes, failed, shaped, held, sharp, facts, next_id = cursor.fetchone()
    states, power = {}, {}
    for pk, node_state, power_state, power_since in nodes or ():
        if node_state != Node.State.AVAILABLE:
            states[pk] = node_state
        if power_state != Node.Power.ON:
            power[pk] = (power_state, None if power_since is None else float(power_since))
    return PoolReads(
        generation=generation or 0,
        changes=[(int(g), int(r)) for g, r in changes or ()],
        rows=[(r, n, i, float(s), float(e), t, b, p) for r, n, i, s, e, t, b, p in rows or ()],
        states=states,
        power=power,
        failed=set(failed or ()),
        shaped={str(t): groups for t, groups in shaped or ()},
        held=None if tenant_id is None else [(float(s), float(e), int(g)) for s, e, g in held or ()],
        sharp=None
        if sharp_fabric is None
        else [(int(r), int(p), list(t), float(s), float(e)) for r, p, t, s, e in sharp or ()],
        facts=None if facts is None else tuple(facts),
        reservation_id=next_id,
    )


def read_row_by_row(pool_id: int, since: int | None, now: dt.datetime, *asked: int | None) -> PoolReads:
    """:func:`read_pool` as one ORM query per read (SQLite; the benchmark's in-run baseline).
    ``asked``: :func:`read_pool`'s ``tenant_id``, ``sharp_fabric`` and ``facts_fabric``, in that
    order; the fabric's facts are not read here (the grant reads them on its own then)."""
    tenant_id, sharp_fabric = (*asked, None, None)[:2]
    generation = BookingGeneration.objects.filter(pool_id=pool_id).values_list("generation", flat=True).first() or 0
    changes: list[tuple[int, int]] = []
    rows: list[AllocationRow] = []
    if since is not None and generation > since:
        changes = list(
            BookingChange.objects.filter(pool_id=pool_id, generation__gt=since, generation__lte=generation)
            .order_by()
            .values_list("generation", "reservation_id")
        )
        allocations = ReservationAllocation.objects.filter(
            reservation_id__in=sorted({r for _, r in changes}), end__gt=now
        ).order_by()
        for res_id, node_pk, index, start, end, owner, borrowed, priority_class in allocations.values_list(
            "reservation_id",
            "node_id",
            "gpu__index",
            "start",
            "end",
            "reservation__tenant_id",
            "reservation__borrowed",
            "reservation__priority_class",
        ):
            rows.append((res_id, node_pk, index, start.timestamp(), end.timestamp(), owner, borrowed, priority_class))
    in_pool = Pool.nodes.through.objects.filter(pool_id=pool_id).values("node_id")
    states, power = {}, {}
    nodes = Node.objects.filter(pk__in=in_pool).exclude(state=Node.State.AVAILABLE, power_state=Node.Power.ON)
    for pk, node_state, power_state, power_since in nodes.order_by().values_list(
        "pk", "state", "power_state", "power_changed_at"
    ):
        if node_state != Node.State.AVAILABLE:
            states[pk] = node_state
        if power_state != Node.Power.ON:
            power[pk] = (power_state, power_since.timestamp() if power_since else None)
    failed = GPU.objects.filter(node_id__in=in_pool, health=GPU.Health.FAILED).order_by()
    shaped = Quota.objects.filter(pool_id=pool_id, guaranteed_leaf_groups__gt=0).order_by()
    held = None
    if tenant_id is not None:
        holding = Reservation.objects.live().filter(tenant_id=tenant_id, pool_id=pool_id, end__gt=now).order_by()
        held = [(s.timestamp(), e.timestamp(), g) for s, e, g in holding.values_list("start", "end", "gpus")]
    sharp = None
    if sharp_fabric is not None:
        holders = Reservation.objects.live().filter(fabric_id=sharp_fabric, placement__has_key="sharp").order_by()
        sharp = [
            (pk, pool, list(placement["sharp"]), s.timestamp(), e.timestamp())
            for pk, pool, placement, s, e in holders.values_list("pk", "pool_id", "placement", "start", "end")
        ]
    return PoolReads(
        generation=generation,
        changes=changes,
        rows=rows,
        states=states,
        power=power,
        failed=set(failed.values_list("node_id", flat=True)),
        shaped={str(t): g for t, g in shaped.values_list("tenant_id", "guaranteed_leaf_groups") if g},
        held=held,
        sharp=sharp,
    )
