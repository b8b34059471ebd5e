"""Every row lock scheduling takes, in one place and one order.

**The reservation lock** of a pool (:func:`reservation_lock`) is the row lock of its
:class:`~scheduling.models.BookingGeneration` row, which every change of the pool's bookings bumps
anyway (:func:`.snapshots.touch`). Everything that changes what may be placed on a pool's nodes
takes it, for every pool involved, before it reads what it decides on: reserve and the queue pass
(the pool), extend, release, cancel and preempt (the pools of the reservation's nodes), a node's
state (:func:`node_for_update`: the pools of the node; the power path locks nodes through it too)
and a pool's membership. One row per pool instead of every node row of the pool (2,048 on a
16,384-GPU pool): a placement decided under it stays true until commit, because nobody else can
book, free or take a node of the pool out of service meanwhile. Readers (preview, the cached
snapshot's refresh) never wait on it. Should a writer skip it anyway, the allocations' exclusion
constraint still refuses an overlap (reserve retries).

Order: the tenant's quota row (the queue pass: all the pool's quota rows), then reservation locks
(pools in primary-key order, in one call), then reservation rows, then node rows. Several rows of
one kind are always locked in primary-key order, so two writers never wait on each other in
opposite orders. Services lock through this module (Saleor's ``lock_objects`` pattern) instead of
importing each other to reuse a lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q, QuerySet

from scheduling.models import BookingGeneration, Node, Pool, Quota, Reservation


def quota_for_update(*, tenant_id: int, pool_id: int) -> Quota | None:
    """Lock and return the tenant's quota row in the pool (None when it has no quota there).

    The row alone: through the model's default ordering (fabric, pool, tenant names) a plain
    ``first()`` joined and locked the pool's, fabric's and tenant's rows too, which serialised
    every reserve of a fabric and made them wait on the fabric's changes."""
    rows = Quota.objects.filter(tenant_id=tenant_id, pool_id=pool_id).order_by("pk")
    return rows.select_for_update(of=("self",)).first()


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


def reservation_lock(*, pool_ids: Iterable[int] = (), node_ids: Any = ()) -> list[int]:
    """Take the reservation lock of ``pool_ids`` and of every pool holding one of ``node_ids``
    (ids or a ``values(...)`` subquery), in primary-key order, in one statement; returns the pools
    locked. Call it once per transaction with everything it will touch, before reservation and
    node rows. Every pool has its row from creation on (:func:`.inventory.create_pool`)."""
    explicit = set(pool_ids)
    wanted = Q(pool_id__in=sorted(explicit))
    if not isinstance(node_ids, tuple | list | set | frozenset) or node_ids:
        wanted |= Q(pool_id__in=Pool.nodes.through.objects.filter(node_id__in=node_ids).values("pool_id"))
    rows = BookingGeneration.objects.filter(wanted).order_by("pool_id").select_for_update()
    locked = list(rows.values_list("pool_id", flat=True))
    if not explicit <= set(locked):  # a pool created before its row was (a concurrent creator
        # waits on the unique key until this transaction ends)
        pool_lock_rows(explicit - set(locked))
        locked = list(rows.values_list("pool_id", flat=True))
    return locked


def pool_lock_rows(pool_ids: Iterable[int]) -> None:
    """Create the reservation-lock rows of new pools (their booking generation, at 0)."""
    BookingGeneration.objects.bulk_create(
        [BookingGeneration(pool_id=pk) for pk in sorted(set(pool_ids))], ignore_conflicts=True
    )


def pool_and_overlapping_lock(pool_id: int, *, fabric_wide: bool = False) -> list[int]:
    """The reservation lock of a pool and of every pool sharing a node with it (a booking on the
    pool's nodes is a booking of theirs too): what reserve and the queue pass take. With
    ``fabric_wide`` (a SHARP placement: the fabric's pools share its switches' aggregation trees)
    every pool of the pool's fabric."""
    pools = [pool_id]
    if fabric_wide:
        fabric = Pool.objects.filter(pk=pool_id).values("fabric_id")
        pools = list(Pool.objects.filter(fabric_id__in=fabric).values_list("pk", flat=True))
    return reservation_lock(
        pool_ids=pools, node_ids=Pool.nodes.through.objects.filter(pool_id=pool_id).values("node_id")
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
