"""A pool's engine loaded from the database, and a per-process cache of it kept current by deltas.

:func:`snapshot` loads everything (node states, failed GPUs, the quotas' shaped guarantees and
every allocation ending after ``now``): ~70 ms on a 16,384-GPU pool with a thousand bookings.
:func:`lend` lends the process's cached engine of the pool instead, brought up to date first:

- **Bookings.** Every writer of allocations (``grant``, ``truncate_allocations``, ``extend``)
  calls :func:`touch` in its transaction: it bumps the :class:`~scheduling.models.BookingGeneration`
  of every pool holding the touched nodes (an upsert: the row lock orders the bumps as they commit) and
  writes one :class:`~scheduling.models.BookingChange` row per reservation. A reader reads the
  generation first (one row), then reloads only the reservations changed since its cached
  generation (idempotently: drop the booking, book what the database holds now). A gap in the
  change rows (pruned), a clock that went back, a conflict, or the cache's age past
  :data:`MAX_AGE` (a safety net against writers that bypass the services) mean a full reload.
- **Time.** ``PoolState.advance(now)`` ends bookings whose end passed and starts those whose start
  came, as the database's ``end > now`` filter does.
- **Node states, failed GPUs, shaped guarantees**: re-read on every lend (in the one statement of
  :mod:`.pool_reads` on PostgreSQL: their writers are many and their rows few). Membership: the pool's topology (cached by
  ``Pool.version``) must be the same object, else full reload.

The cache is the process's own (each gunicorn/Celery worker has one); the database stays the truth.
A reserve lends it after taking its row locks, so the refresh sees every booking committed before
them. A lend that finds the cache busy (another thread) or the pool touched by the current,
uncommitted transaction gets a private fresh :func:`snapshot` instead: the cache never holds
uncommitted state, and nobody waits on it. Whatever the borrower books into the engine (the queue
pass books its forecasts) is released when the lend ends; an exception drops the cache.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import F, Max, Min, Sum, Value

from scheduling.models import (
    BookingChange,
    BookingGeneration,
    Pool,
    PriorityClass,
    ReservationAllocation,
    ReservationSubnet,
)
from scheduling.placement import GangGuard, NodeState, Owner, PlacementEngine, ShapedGuarantees
from scheduling.placement.powerfit import NodePower
from scheduling.placement.state import BookingConflict, PoolState
from scheduling.services.pool_reads import AllocationRow, PoolReads, read_pool
from scheduling.services.raw import int_array, prepared_cursor
from scheduling.services.sharp import sharp_guard
from scheduling.services.topology import NamedTopology, pool_topology

#: Reclaim order of priority classes (``Owner.priority``): lower ranks are preempted first.
#: Best-effort is preemptible by definition; training checkpoints and restarts; inference serves
#: live traffic. The same order as the default service levels (0, 1, 2).
PRIORITY_RANK: dict[str, int] = {
    PriorityClass.BEST_EFFORT: 0,
    PriorityClass.TRAINING: 1,
    PriorityClass.INFERENCE: 2,
}
#: A cached snapshot older than this is reloaded whole (writers that bypass :func:`touch`).
MAX_AGE = 300.0
#: Change rows kept per pool (a reader further behind reloads whole).
KEEP_CHANGES = 5000
#: Bookings a borrower added and the lend released (stale heap events): past this, reload whole.
MAX_STALE_EVENTS = 100_000


def priority_rank(priority_class: str) -> int:
    """The reclaim rank of a priority class (unknown classes rank as training)."""
    return PRIORITY_RANK.get(priority_class, PRIORITY_RANK[PriorityClass.TRAINING])


@dataclass
class Snapshot:
    """A pool's engine loaded with every booking from the database, at ``now``."""

    named: NamedTopology
    engine: PlacementEngine
    now: dt.datetime
    #: Engine index -> power of the nodes that are not on, read with the rest (None: not read).
    power: dict[int, NodePower] | None = None
    #: (tenant id, its holding windows in the pool as (start, end) epoch seconds and GPUs),
    #: read with the rest when the lend named a tenant (its quota usage, :func:`.quotas.usage`).
    held: tuple[int, list[tuple[float, float, int]]] | None = None
    #: What a grant reads of the pool's fabric (:func:`.pool_reads.facts_columns`), read with the
    #: rest when the lend asked (None: not read).
    fabric: tuple[Any, ...] | None = None
    #: A reservation id taken from its sequence with ``fabric`` (the grant's new row, inserted
    #: with its allocations); None: not taken.
    reservation_id: int | None = None


# ---------------------------------------------------------------- loading


def _index_of(named: NamedTopology) -> dict[int, int]:
    return {pk: i for i, pk in enumerate(named.node_pks)}


def _guards(reads: PoolReads, pool: Pool, named: NamedTopology) -> list[GangGuard]:
    """The pool's gang guards: the quotas' shaped guarantees, and SHARP trees where switches serve
    them (on fabrics with SHARP-capable switches only; their holders read with the rest)."""
    guards: list[GangGuard] = [ShapedGuarantees(reads.shaped)]
    sharp = sharp_guard(pool, named, reads.sharp)
    if sharp is not None:
        guards.append(sharp)
    return guards


def _sharp_fabric(pool: Pool, named: NamedTopology) -> int | None:
    """The fabric whose SHARP holders a read of the pool reads (None: no SHARP-capable switch)."""
    return pool.fabric_id if named.sharp_trees else None


def _node_states(reads: PoolReads, index_of: dict[int, int]) -> dict[int, NodeState]:
    """Engine index -> state of every node of the pool that is not available (failed GPU: down)."""
    found = {index_of[pk]: NodeState(state) for pk, state in reads.states.items() if pk in index_of}
    for pk in reads.failed:
        if pk in index_of:
            found[index_of[pk]] = NodeState.DOWN
    return found


def _power(reads: PoolReads, index_of: dict[int, int]) -> dict[int, NodePower]:
    """Engine index -> power of the pool's nodes that are not on."""
    return {index_of[pk]: NodePower(state, since) for pk, (state, since) in reads.power.items() if pk in index_of}


def _book(state: PoolState, named: NamedTopology, pool: Pool, now: dt.datetime) -> None:
    """Book every allocation of the pool's nodes ending after ``now``: one row per (reservation, node) with its GPUs as a bit mask, then one row per
    reservation with its owner and window. ``order_by()`` drops the models' default orderings,
    which would join five tables and sort every allocation row."""
    index_of = _index_of(named)
    in_pool = Pool.nodes.through.objects.filter(pool_id=pool.pk).values("node_id")
    rows = ReservationAllocation.objects.filter(node_id__in=in_pool, end__gt=now).order_by()
    masks: dict[int, list[tuple[int, int]]] = defaultdict(list)
    gpu_bit = Value(1).bitleftshift(F("gpu__index"))  # type: ignore[arg-type]  # stub wants int; any expression works
    for res_id, node_pk, mask in (
        rows.values("reservation_id", "node_id")
        .annotate(mask=Sum(gpu_bit, distinct=True))
        .values_list("reservation_id", "node_id", "mask")
    ):
        masks[res_id].append((index_of[node_pk], int(mask)))
    owners = rows.values("reservation_id").annotate(
        first=Min("start"),
        last=Max("end"),
        tenant=F("reservation__tenant_id"),
        borrowed=F("reservation__borrowed"),
        priority=F("reservation__priority_class"),
    )
    for row in owners.values_list("reservation_id", "first", "last", "tenant", "borrowed", "priority"):
        res_id, start, end, tenant_id, borrowed, priority_class = row
        state.book(
            f"r{res_id}",
            Owner(str(tenant_id), borrowed, priority_rank(priority_class)),
            tuple(sorted(masks[res_id])),
            start.timestamp(),
            end.timestamp(),
        )


def _book_rows(state: PoolState, index_of: dict[int, int], rows: list[AllocationRow]) -> None:
    """Book what the database holds now of a few reservations on the pool's nodes (a delta
    touches one or two reservations, not the pool): one booking per reservation, its GPUs as a
    bit mask per node, over the span of its rows."""
    masks: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    windows: dict[int, tuple[float, float, Owner]] = {}
    for res_id, node_pk, index, start, end, tenant_id, borrowed, priority_class in rows:
        node = index_of.get(node_pk)
        if node is None:
            continue  # a node of another pool of the reservation's
        masks[res_id][node] |= 1 << index
        seen = windows.get(res_id)
        if seen is None:
            windows[res_id] = (start, end, Owner(str(tenant_id), borrowed, priority_rank(priority_class)))
        elif start < seen[0] or end > seen[1]:
            windows[res_id] = (min(start, seen[0]), max(end, seen[1]), seen[2])
    for res_id, (start, end, owner) in windows.items():
        state.book(f"r{res_id}", owner, tuple(sorted(masks[res_id].items())), start, end)


def snapshot(pool: Pool, now: dt.datetime, tenant_id: int | None = None, facts: bool = False) -> Snapshot:
    """A fresh, private engine of the pool: node states, failed GPUs, the shaped guarantees of
    the pool's quotas and every allocation ending after now (owner: tenant, borrowed, priority)."""
    named = pool_topology(pool)
    reads = read_pool(pool.pk, None, now, tenant_id, _sharp_fabric(pool, named), pool.fabric_id if facts else None)
    index_of = _index_of(named)
    engine = PlacementEngine(named.topology, now=now.timestamp(), guards=_guards(reads, pool, named))
    for index, node_state in _node_states(reads, index_of).items():
        engine.set_node_state(index, node_state)
    _book(engine.state, named, pool, now)
    return Snapshot(
        named, engine, now, _power(reads, index_of), _held(reads, tenant_id), reads.facts, reads.reservation_id
    )


def _held(reads: PoolReads, tenant_id: int | None) -> tuple[int, list[tuple[float, float, int]]] | None:
    return None if tenant_id is None or reads.held is None else (tenant_id, reads.held)


# ---------------------------------------------------------------- writers


def touch(node_ids: Iterable[int], reservation_ids: Iterable[int]) -> None:
    """Record, in the current transaction, that these reservations' allocations on these nodes
    changed: bump the generation of every pool holding one of the nodes (primary-key order) and
    write its change rows. Call it after the allocation rows were written. On PostgreSQL one
    statement does it all (the pools, the bumps, the change rows)."""
    reservations = sorted(set(reservation_ids))
    nodes = sorted(set(node_ids))
    if not reservations or not nodes:
        return
    if connection.vendor == "postgresql":
        _touched(_touch_in_one(nodes, reservations))
    else:
        _touched(_touch_row_by_row(nodes, reservations))


def write_allocations(
    reservation_id: int,
    cells: Iterable[tuple[int, int]],
    start: dt.datetime,
    end: dt.datetime,
    *,
    subnets: Sequence[tuple[int, int, int]] = (),
    inserts: Sequence[tuple[str, list[Any]]] = (),
) -> None:
    """Insert a reservation's allocations, one per (node pk, GPU pk) over ``[start, end)``, and
    its subnet rows, one per (fabric pk, P_Key, SL) (:class:`~scheduling.models.ReservationSubnet`,
    live), and :func:`touch` them: on PostgreSQL in one statement (``INSERT … SELECT FROM unnest``
    CTEs ahead of the touch's), without a model instance per row; elsewhere ``bulk_create`` then
    touch. A live P_Key a concurrent grant took on one of the fabrics fails the statement.
    ``inserts``: further rows' INSERT statements (:func:`.raw.insert_of`: the new reservation's row and
    its audit row), run first, in the same statement on PostgreSQL."""
    if connection.vendor != "postgresql":
        write_row_by_row(reservation_id, cells, start, end, subnets=subnets, inserts=inserts)
        return
    cells = list(cells)
    nodes = sorted({node for node, _ in cells})
    table = connection.ops.quote_name(ReservationAllocation._meta.db_table)
    insert = "".join(f"row{i} AS ({sql})," for i, (sql, _) in enumerate(inserts))
    insert += (
        f'inserted AS (INSERT INTO {table} (reservation_id, node_id, gpu_id, start, "end")'  # noqa: S608 - ours
        f" SELECT %s, n, g, %s, %s FROM unnest(%s::bigint[], %s::bigint[]) AS cell(n, g)),"
    )
    params: list[Any] = [p for _, row in inserts for p in row]
    params += [reservation_id, start, end, int_array(n for n, _ in cells), int_array(g for _, g in cells)]
    if subnets:
        rows = connection.ops.quote_name(ReservationSubnet._meta.db_table)
        insert += (
            f" subnets AS (INSERT INTO {rows} (reservation_id, fabric_id, pkey, pkey_live, sl)"  # noqa: S608 - ours
            f" SELECT %s, f, k, true, l FROM unnest(%s::bigint[], %s::int[], %s::int[]) AS subnet(f, k, l)),"
        )
        params += [reservation_id, [f for f, _, _ in subnets], [k for _, k, _ in subnets], [sl for *_, sl in subnets]]
    _touched(_touch_in_one(nodes, [reservation_id], (insert, params)))


def write_row_by_row(
    reservation_id: int,
    cells: Iterable[tuple[int, int]],
    start: dt.datetime,
    end: dt.datetime,
    *,
    subnets: Sequence[tuple[int, int, int]] = (),
    inserts: Sequence[tuple[str, list[Any]]] = (),
) -> None:
    """:func:`write_allocations` as ``bulk_create`` then :func:`touch` (SQLite; the benchmark's
    in-run baseline); ``inserts`` one statement each, first."""
    with connection.cursor() as cursor:
        for sql, params in inserts:
            cursor.execute(sql, params)
    rows = [
        ReservationAllocation(reservation_id=reservation_id, node_id=n, gpu_id=g, start=start, end=end)
        for n, g in cells
    ]
    ReservationAllocation.objects.bulk_create(rows, batch_size=2000)
    ReservationSubnet.objects.bulk_create(
        ReservationSubnet(reservation_id=reservation_id, fabric_id=f, pkey=k, sl=sl) for f, k, sl in subnets
    )
    touch({row.node_id for row in rows}, [reservation_id])


def _touched(bumped: list[tuple[int, int]]) -> None:
    """After a touch: prune the change rows now and then, remember the pools as touched."""
    for pool_id, generation in bumped:
        if generation % 500 == 0:  # prune now and then, under the same row lock
            BookingChange.objects.filter(pool_id=pool_id, generation__lte=generation - KEEP_CHANGES).delete()
    blocks = connection.atomic_blocks
    if blocks and bumped:
        _local.touched = (blocks[0], {*_touched_pools(), *(pool_id for pool_id, _ in bumped)})


def _touch_in_one(
    nodes: list[int], reservations: list[int], before: tuple[str, list[Any]] = ("", [])
) -> list[tuple[int, int]]:
    """The touch in one statement; ``before``: a data-modifying CTE (and its parameters) to run in
    it, ahead of the bump (the allocation rows: one round trip for both)."""
    generations = connection.ops.quote_name(BookingGeneration._meta.db_table)
    changes = connection.ops.quote_name(BookingChange._meta.db_table)
    members = connection.ops.quote_name(Pool.nodes.through._meta.db_table)
    # Rows are bumped in the order the SELECT yields them (pool id): the lock order of the rest.
    sql = (
        f"WITH {before[0]} bumped AS ("  # noqa: S608 - the table names are ours
        f" INSERT INTO {generations} (pool_id, generation)"
        f" SELECT DISTINCT pool_id, 1 FROM {members} WHERE node_id = ANY(%s::bigint[]) ORDER BY pool_id"
        f" ON CONFLICT (pool_id) DO UPDATE SET generation = {generations}.generation + 1"
        f" RETURNING pool_id, generation),"
        f" written AS (INSERT INTO {changes} (pool_id, generation, reservation_id)"
        f" SELECT b.pool_id, b.generation, r FROM bumped b CROSS JOIN unnest(%s::bigint[]) AS r)"
        f" SELECT pool_id, generation FROM bumped ORDER BY pool_id"
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, [*before[1], int_array(nodes), int_array(reservations)])
        return [(int(p), int(g)) for p, g in cursor.fetchall()]


def _touch_row_by_row(nodes: list[int], reservations: list[int]) -> list[tuple[int, int]]:
    pools = sorted(set(Pool.nodes.through.objects.filter(node_id__in=nodes).values_list("pool_id", flat=True)))
    table = connection.ops.quote_name(BookingGeneration._meta.db_table)
    bumped, changes = [], []
    with connection.cursor() as cursor:
        for pool_id in pools:
            cursor.execute(
                f"INSERT INTO {table} (pool_id, generation) VALUES (%s, 1) "  # noqa: S608 - the table name is ours
                f"ON CONFLICT (pool_id) DO UPDATE SET generation = {table}.generation + 1 RETURNING generation",
                [pool_id],
            )
            generation = int(cursor.fetchone()[0])
            bumped.append((pool_id, generation))
            changes += [BookingChange(pool_id=pool_id, generation=generation, reservation_id=r) for r in reservations]
    BookingChange.objects.bulk_create(changes)
    return bumped


_local = threading.local()


def _touched_pools() -> set[int]:
    """Pools the current transaction touched (it is not committed yet): the outermost atomic
    block that was open then is still open. A reused decorator's block may look open again:
    a false "touched" only costs a private snapshot."""
    touched = getattr(_local, "touched", None)
    blocks = connection.atomic_blocks
    if touched is None or not blocks or blocks[0] is not touched[0]:
        return set()
    return set(touched[1])


# ---------------------------------------------------------------- the cache


@dataclass
class _Cached:
    named: NamedTopology
    state: PoolState
    generation: int
    loaded: float  # monotonic time of the last full load
    marked: dict[int, NodeState] = field(default_factory=dict)
    stale_events: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    index_of: dict[int, int] = field(default_factory=dict)  # node pk -> engine index


def _entry(named: NamedTopology, now: dt.datetime) -> _Cached:
    return _Cached(named, PoolState(named.topology, now.timestamp()), -1, 0.0, index_of=_index_of(named))


_cache: dict[int, _Cached] = {}
_cache_lock = threading.Lock()
#: Lends served, by how: hit (no change), delta, full (reload), private (fresh, cache not used).
stats: dict[str, int] = defaultdict(int)


def forget(pool_id: int | None = None) -> None:
    """Drop the cached snapshot of a pool (all of them: tests): the next lend loads it whole."""
    with _cache_lock:
        if pool_id is None:
            _cache.clear()
        else:
            _cache.pop(pool_id, None)


@contextlib.contextmanager
def lend(pool: Pool, now: dt.datetime, tenant_id: int | None = None, facts: bool = False) -> Iterator[Snapshot]:
    """The pool's snapshot at ``now``, current as of this call (see the module docstring). The
    engine is the borrower's until the ``with`` block ends; bookings it adds are undone then.
    ``tenant_id``: read that tenant's holdings in the pool with the rest (``Snapshot.held``);
    ``facts``: what a grant reads of the pool's fabric (``Snapshot.fabric``; under the lock)."""
    named = pool_topology(pool)
    with _cache_lock:
        entry = _cache.get(pool.pk)
        if entry is None or entry.named is not named:
            entry = _cache[pool.pk] = _entry(named, now)
    if pool.pk in _touched_pools() or not entry.lock.acquire(blocking=False):
        stats["private"] += 1
        yield snapshot(pool, now, tenant_id, facts)
        return
    try:
        try:
            reads = _refresh(entry, pool, now, tenant_id, facts)
        except BaseException:
            entry.generation = -1
            raise
        engine = PlacementEngine(named.topology, state=entry.state, guards=_guards(reads, pool, named))
        before = set(entry.state.bookings)
        ok = False
        try:
            yield Snapshot(
                named,
                engine,
                now,
                _power(reads, entry.index_of),
                _held(reads, tenant_id),
                reads.facts,
                reads.reservation_id,
            )
            ok = True
        except Exception:
            ok = True  # an ordinary error: the engine's mutations are all-or-nothing
            raise
        finally:
            added = [b for b in entry.state.bookings if b not in before]
            if not ok or len(entry.state.bookings) - len(added) != len(before):
                entry.generation = -1  # interrupted, or the borrower removed bookings: reload next time
            else:
                for booking_id in added:
                    entry.state.release(booking_id)
                entry.stale_events += len(added)
    finally:
        entry.lock.release()


def _refresh(
    entry: _Cached, pool: Pool, now: dt.datetime, tenant_id: int | None = None, facts: bool = False
) -> PoolReads:
    """Bring the entry up to ``now``: one read of the pool (:func:`.pool_reads.read_pool`), the
    changed reservations re-booked from it, a full load when that cannot be trusted. The generation
    is read with the changes, in one snapshot of the database: changes committed after it are
    loaded (idempotently) by the next refresh; never the other way round."""
    at = now.timestamp()
    full = (
        entry.generation < 0
        or at < entry.state.now
        or time.monotonic() - entry.loaded > MAX_AGE
        or entry.stale_events > MAX_STALE_EVENTS
    )
    sharp, fabric = _sharp_fabric(pool, entry.named), pool.fabric_id if facts else None
    reads = read_pool(pool.pk, None if full else entry.generation, now, tenant_id, sharp, fabric)
    generation = reads.generation
    full = full or generation < entry.generation
    if not full and generation > entry.generation:
        if len({g for g, _ in reads.changes}) != generation - entry.generation:
            full = True  # pruned past us
        else:
            try:
                entry.state.advance(at)
                for res_id in {r for _, r in reads.changes}:
                    if f"r{res_id}" in entry.state.bookings:
                        entry.state.release(f"r{res_id}")
                _book_rows(entry.state, entry.index_of, reads.rows)
                stats["delta"] += 1
            except (BookingConflict, ValueError):
                full = True
    elif not full:
        entry.state.advance(at)
        stats["hit"] += 1
    if full:
        entry.state = PoolState(entry.named.topology, at)
        entry.marked = {}
        entry.stale_events = 0
        entry.loaded = time.monotonic()
        _book(entry.state, entry.named, pool, now)
        stats["full"] += 1
    entry.generation = generation
    marked = _node_states(reads, entry.index_of)
    for index in entry.marked.keys() - marked.keys():
        entry.state.set_node_state(index, NodeState.AVAILABLE)
    for index, node_state in marked.items():
        if entry.marked.get(index) is not node_state:
            entry.state.set_node_state(index, node_state)
    entry.marked = marked
    return reads
