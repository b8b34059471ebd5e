"""Every row lock scheduling takes, in one place and one order.

Writers that lock a quota and nodes take the tenant's quota row first, then the node rows (reserve
and extend both do); several rows of one kind are always locked in primary-key order, so two
writers never wait on each other in opposite orders. The queue pass locks all the pool's quota
rows, then its nodes, then the queued reservations; cancelling a queued request locks only its row. Services lock through this module (Saleor's
``lock_objects`` pattern) instead of importing each other to reuse a lock.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from scheduling.models import Node, Pool, Quota, Reservation


def quota_for_update(*, tenant_id: int, pool_id: int) -> Quota | None:
    """Lock and return the tenant's quota row in the pool (None when it has no quota there)."""
    return Quota.objects.select_for_update().filter(tenant_id=tenant_id, pool_id=pool_id).first()


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


def lock_nodes(node_ids: Any) -> None:
    """Lock node rows in primary-key order (``node_ids``: ids or a values("pk") subquery)."""
    list(
        Node.objects.filter(pk__in=node_ids).order_by("pk").select_for_update(of=("self",)).values_list("pk", flat=True)
    )


def node_for_update(pk: int) -> Node:
    """Lock and return one node row."""
    return Node.objects.select_for_update().get(pk=pk)


def pool_for_update(pk: int) -> Pool:
    """Lock and return one pool row."""
    return Pool.objects.select_for_update().get(pk=pk)
