"""Every row lock scheduling takes, in one place and one order.

**The reservation lock** of a pool (:func:`reservation_lock`) is the row lock of its
:class:`~scheduling.models.BookingGeneration` row, which every change of the pool's bookings bumps
anyway (:func:`.snapshots.touch`). Everything that changes what may be placed on a pool's nodes
takes it, for every pool involved, before it reads what it decides on: reserve and the queue pass
(the pool and the pools sharing a node with it), extend, release and cancel (the reservation's pool
and the pools of its nodes), preempt (the same for every victim, before any is wound down:
:class:`WiderLock`), a node's state (:func:`node_for_update`: the pools of the node; the power path
locks nodes through it too) and a pool's membership (the pool and the pools of the nodes it adds or
removes). Every pool has its row from the transaction that creates it (a ``post_save`` hook in
:mod:`scheduling.models`); the lock creates a row still missing. One row per pool instead of every
node row of the pool (2,048 on a 16,384-GPU pool): a placement decided under it stays true until
commit, because nobody else can book, free or take a node of the pool out of service meanwhile.
Readers (preview, the cached snapshot's refresh) never wait on it. Should a writer skip it anyway,
the allocations' exclusion constraint still refuses an overlap (reserve retries).

Order: the tenant's quota row (the queue pass: all the pool's quota rows), then reservation locks
(pools in primary-key order, in one call), then reservation rows, then node rows. Several rows of
one kind are always locked in primary-key order, so two writers never wait on each other in opposite
orders; a set found larger under the lock than before it is locked again whole, after the first
locks were given back (:func:`reservation_lock`), never topped up out of order. Services lock
through this module (Saleor's ``lock_objects`` pattern) instead of importing each other to reuse a
lock.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Q, QuerySet

from console.tenancy.errors import Conflict
from scheduling.models import BookingGeneration, Node, Pool, Quota, Reservation, ReservationAllocation
from scheduling.services.raw import columns, prepared_cursor, row_instance, table

#: Attempts to lock a set of pools that keeps growing under the lock (each attempt takes the union).
MAX_RELOCKS = 8


def quota_for_update(*, tenant_id: int, pool_id: int) -> Quota | None:
    """Lock and return the tenant's quota row in the pool (None when it has no quota there).

    The row alone: through the model's default ordering (fabric, pool, tenant names) a plain
    ``first()`` joined and locked the pool's, fabric's and tenant's rows too, which serialised
    every reserve of a fabric and made them wait on the fabric's changes."""
    if connection.vendor == "postgresql":  # cached text, prepared (the reserve path)
        with prepared_cursor() as cursor:
            cursor.execute(_quota_statement(), [tenant_id, pool_id])
            row = cursor.fetchone()
        return None if row is None else row_instance(Quota, list(row))
    rows = Quota.objects.filter(tenant_id=tenant_id, pool_id=pool_id).order_by("pk")
    return rows.select_for_update(of=("self",)).first()


@functools.cache
def _quota_statement() -> str:
    return (
        f"SELECT {columns(Quota, 'q')} FROM {table(Quota)} q"  # noqa: S608 - ours
        f" WHERE q.tenant_id = %s AND q.pool_id = %s ORDER BY q.id LIMIT 1 FOR UPDATE"
    )


def pool_quotas_for_update(pool_id: int) -> list[Quota]:
    """Lock every quota row of a pool, in primary-key order (the queue pass, which may place for
    any of the pool's tenants; it then locks nodes, like reserve)."""
    return list(Quota.objects.filter(pool_id=pool_id).order_by("pk").select_for_update())


def quota_by_pk_for_update(pk: int) -> Quota:
    """Lock and return one quota row."""
    return Quota.objects.select_for_update().get(pk=pk)


def reservation_for_update(pk: int) -> Reservation:
    """Lock and return one reservation row."""
    return Reservation.objects.select_for_update().get(pk=pk)


def reservations_for_update(queryset: QuerySet[Reservation], *, skip_locked: bool = False) -> QuerySet[Reservation]:
    """``queryset`` locked in primary-key order (``skip_locked``: pass over rows another
    transaction holds, for periodic sweeps that will see them next time)."""
    return queryset.order_by("pk").select_for_update(skip_locked=skip_locked)


def reservation_lock(
    *,
    pool_ids: Iterable[int] = (),
    node_ids: Any = (),
    restart: bool = False,
    reread: Callable[[], Iterable[int]] | None = None,
) -> list[int]:
    """Take the reservation lock of ``pool_ids`` and of every pool holding one of ``node_ids``
    (ids or a subquery such as a reservation's allocations' ``values("node_id")``), in primary-key
    order, in one statement; returns the pools locked. Call it once per transaction with
    everything it will touch, before reservation and node rows.

    The pools of ``node_ids`` are read again once the locks are held: the statement's subquery
    saw the rows as they were when it started, before it waited (a queued reservation placed, a
    node added to a pool meanwhile). When the set grew, or a pool has no lock row yet (created
    without :func:`.inventory.create_pool` and its post-save hook, e.g. by ``bulk_create``),
    the locks are given back (rolled back to a savepoint taken before them; PostgreSQL releases
    row locks taken after it), the missing rows are created (``ON CONFLICT DO NOTHING``) and the
    whole set is locked again in one statement: never a pool locked after a higher one.

    ``restart``: for callers that redo their whole transaction anyway (reserve): no savepoint
    (two round trips fewer); when the set grew or a row is missing, :class:`WiderLock` names the
    pools to lock from the start (the caller creates missing rows with :func:`pool_lock_rows`).

    ``reread``: the re-read of the pools of ``node_ids`` as the caller makes it once the locks are
    held (reserve reads its pool row in the same statement, :func:`.pool_rows.pool_row`)."""
    wanted = set(pool_ids)
    nodes_given = not isinstance(node_ids, tuple | list | set | frozenset) or bool(node_ids)
    for _ in range(MAX_RELOCKS):
        savepoint = None if restart else transaction.savepoint()
        locked = _lock_rows(sorted(wanted), node_ids if nodes_given else None)
        if nodes_given:
            needed = wanted | set(reread() if reread is not None else _pools_of(node_ids))
        else:
            needed = set(wanted)
        if needed <= set(locked):
            if savepoint is not None:
                transaction.savepoint_commit(savepoint)
            return locked
        if savepoint is None:
            raise WiderLock(needed | set(locked))
        transaction.savepoint_rollback(savepoint)
        pool_lock_rows(needed - set(locked))  # a concurrent creator waits on the unique key
        wanted = needed | set(locked)
    raise Conflict("the pools to lock kept changing; try again")


@dataclass(frozen=True, slots=True)
class MembersOf:
    """The nodes of a pool, as ``node_ids`` of :func:`reservation_lock` (the lock's statement is
    then text cached once per process on PostgreSQL: reserve and the queue pass take it)."""

    pool_id: int


def _lock_rows(pool_ids: list[int], node_ids: Any) -> list[int]:
    """Lock the rows of ``pool_ids`` and of the pools of ``node_ids`` (None: none), in pool order."""
    if isinstance(node_ids, MembersOf) and connection.vendor == "postgresql":
        with prepared_cursor() as cursor:
            cursor.execute(_members_lock_statement(), [pool_ids, node_ids.pool_id])
            return [row[0] for row in cursor.fetchall()]
    condition = Q(pool_id__in=pool_ids)
    if node_ids is not None:
        condition |= Q(pool_id__in=_pools_of(node_ids))
    rows = BookingGeneration.objects.filter(condition).order_by("pool_id").select_for_update()
    return list(rows.values_list("pool_id", flat=True))


@functools.cache
def _members_lock_statement() -> str:
    rows = connection.ops.quote_name(BookingGeneration._meta.db_table)
    members = connection.ops.quote_name(Pool.nodes.through._meta.db_table)
    return (
        f"SELECT pool_id FROM {rows} WHERE pool_id = ANY(%s::bigint[]) OR pool_id IN"  # noqa: S608 - ours
        f" (SELECT o.pool_id FROM {members} o WHERE o.node_id IN (SELECT m.node_id FROM {members} m WHERE m.pool_id = %s))"
        f" ORDER BY pool_id FOR UPDATE"
    )


def _pools_of(node_ids: Any) -> QuerySet[Any]:
    if isinstance(node_ids, MembersOf):
        node_ids = Pool.nodes.through.objects.filter(pool_id=node_ids.pool_id).values("node_id")
    return Pool.nodes.through.objects.filter(node_id__in=node_ids).values_list("pool_id", flat=True).distinct()


def booked_pools(reservation_ids: Iterable[int]) -> set[int]:
    """The pools whose reservation lock covers these reservations: theirs and every pool holding
    a node they have an allocation on (what winding them down bumps, :func:`.snapshots.touch`)."""
    ids = sorted(set(reservation_ids))
    if not ids:
        return set()
    own = Reservation.objects.filter(pk__in=ids).values_list("pool_id", flat=True)
    nodes = ReservationAllocation.objects.filter(reservation_id__in=ids).values("node_id")
    return set(own) | set(_pools_of(nodes))


class WiderLock(Exception):
    """A transaction found it must hold more reservation locks than it took (preempting a
    reservation that also holds nodes of other pools): it rolls back and locks ``pools`` first."""

    def __init__(self, pools: Iterable[int]) -> None:
        super().__init__(f"needs the reservation locks of pools {sorted(set(pools))}")
        self.pools = frozenset(pools)


def require_locked(locked: Iterable[int], reservation_ids: Iterable[int]) -> None:
    """Raise :class:`WiderLock` unless ``locked`` covers :func:`booked_pools` of the reservations."""
    ids = set(reservation_ids)
    if not ids:
        return
    held = set(locked)
    needed = booked_pools(ids)
    if not needed <= held:
        raise WiderLock(held | needed)


def pool_lock_rows(pool_ids: Iterable[int]) -> None:
    """Create the reservation-lock rows of new pools (their booking generation, at 0)."""
    BookingGeneration.objects.bulk_create(
        [BookingGeneration(pool_id=pk) for pk in sorted(set(pool_ids))], ignore_conflicts=True
    )


def pool_and_overlapping_lock(
    pool_id: int,
    *,
    also: Iterable[int] = (),
    restart: bool = False,
    fabric_wide: bool = False,
    reread: Callable[[], Iterable[int]] | None = None,
) -> list[int]:
    """The reservation lock of a pool and of every pool sharing a node with it (a booking on the
    pool's nodes is a booking of theirs too): what reserve and the queue pass take (``also``:
    further pools, e.g. those of reservations it will preempt, :class:`WiderLock`). With
    ``fabric_wide`` (a SHARP placement: the fabric's pools share its switches' aggregation trees)
    every pool of the pool's fabric. ``reread``: the pools of the pool's nodes read again under the
    lock, as :func:`reservation_lock` takes it."""
    pools = [pool_id, *also]
    if fabric_wide:
        fabric = Pool.objects.filter(pk=pool_id).values("fabric_id")
        pools += list(Pool.objects.filter(fabric_id__in=fabric).values_list("pk", flat=True))
    return reservation_lock(
        pool_ids=pools,
        node_ids=MembersOf(pool_id),
        restart=restart,
        reread=reread,
    )


def lock_nodes(node_ids: Any) -> None:
    """The reservation lock of the nodes' pools, then the node rows in primary-key order
    (``node_ids``: ids or a ``values("pk")`` subquery)."""
    reservation_lock(node_ids=node_ids)
    list(
        Node.objects.filter(pk__in=node_ids).order_by("pk").select_for_update(of=("self",)).values_list("pk", flat=True)
    )


def node_for_update(pk: int) -> Node:
    """Lock and return one node row, after the reservation lock of its pools (a change of the
    node's state or power then never races a placement on it)."""
    reservation_lock(node_ids=[pk])
    return Node.objects.select_for_update().get(pk=pk)


def pool_for_update(pk: int) -> Pool:
    """Lock and return one pool row."""
    return Pool.objects.select_for_update().get(pk=pk)
