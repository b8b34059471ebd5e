"""The reserve path's reads of its pool row, in one statement of cached text on PostgreSQL.

:func:`pool_row` reads the pool with its fabric and what the cached topology's key and the site
logic need (:func:`.topology.annotated_pools`: the design revision's time ``revised``, whether a
member is on another fabric ``foreign``, the home fabric's site ``home_site``), and with it either
the requesting tenant's row (before the transaction: one round trip instead of two) or the pools of
the pool's nodes (under the reservation lock: the lock's re-read, :func:`.locks.reservation_lock`,
and the pool as it is under the lock in one round trip). The text is built once per process, so no
ORM query is compiled on the hot path; elsewhere (SQLite) and in the benchmark's one-per-read
baseline the same reads are ORM queries (:func:`pool_row_by_row`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from django.db import connection

from console.fabric.models import Fabric, Site
from console.tenancy.errors import NotFound
from console.tenancy.models import Tenant
from designer.models import DesignRevision
from scheduling.models import Node, Pool
from scheduling.services.raw import columns, prepared_cursor, row_instance, table
from scheduling.services.topology import annotated_pools


@dataclass(frozen=True, slots=True)
class PoolRow:
    """A pool (``fabric`` loaded, ``revised``, ``foreign`` and ``home_site`` set as
    :func:`.topology.annotated_pools` sets them) and what was read with it."""

    pool: Pool | None  # None: no such pool
    #: The tenant asked for (None: not asked, or no such tenant).
    tenant: Tenant | None = None
    #: The pools holding a node of the pool (asked for: under the reservation lock).
    pools_of_nodes: frozenset[int] | None = None


def pool_row(pool_id: int, *, tenant_id: int | None = None, pools_of_nodes: bool = False) -> PoolRow:
    """The pool, with the tenant ``tenant_id``'s row or the pools of its nodes."""
    if connection.vendor != "postgresql":
        return pool_row_by_row(pool_id, tenant_id=tenant_id, pools_of_nodes=pools_of_nodes)
    with prepared_cursor() as cursor:
        cursor.execute(_statement(tenant_id is not None, pools_of_nodes), {"pool": pool_id, "tenant": tenant_id})
        row = cursor.fetchone()
    if row is None:
        return PoolRow(None)
    values = list(row)
    pool = row_instance(Pool, values)
    fabric = row_instance(Fabric, values)
    Pool.fabric.field.set_cached_value(pool, fabric)
    pool.revised, pool.foreign, pool.home_site = values[:3]  # type: ignore[attr-defined]
    del values[:3]
    tenant = None
    if tenant_id is not None:
        tenant = row_instance(Tenant, values) if values[0] is not None else None
    pools = frozenset(values[-1] or ()) if pools_of_nodes else None
    return PoolRow(pool, tenant, pools)


def reread_under_lock(pool_id: int, into: list[Pool]) -> frozenset[int]:
    """The pool's row and the pools of its nodes, read under the reservation lock in one statement
    (the ``reread`` of :func:`.locks.reservation_lock`); the pool is appended to ``into``."""
    read = pool_row(pool_id, pools_of_nodes=True)
    if read.pool is None:
        raise NotFound("no such pool")
    into.append(read.pool)
    return read.pools_of_nodes or frozenset()


def pool_row_by_row(pool_id: int, *, tenant_id: int | None = None, pools_of_nodes: bool = False) -> PoolRow:
    """:func:`pool_row` as ORM queries, one per read (SQLite; the benchmark's in-run baseline)."""
    tenant = Tenant.objects.filter(pk=tenant_id).first() if tenant_id is not None else None
    pool = annotated_pools().filter(pk=pool_id).first()
    pools = None
    if pools_of_nodes and pool is not None:
        members = Pool.nodes.through.objects.filter(pool_id=pool_id).values("node_id")
        pools = frozenset(Pool.nodes.through.objects.filter(node_id__in=members).values_list("pool_id", flat=True))
    return PoolRow(pool, tenant, pools)


@functools.cache
def _statement(with_tenant: bool, with_pools: bool) -> str:
    members = table(Pool.nodes.through)
    # The table and column names are ours: nothing here is input.
    sql = (
        f"SELECT {columns(Pool, 'p')}, {columns(Fabric, 'f')}, r.created_at,"  # noqa: S608
        f" EXISTS(SELECT 1 FROM {table(Node)} n JOIN {members} m ON m.node_id = n.id"
        f" WHERE m.pool_id = p.id AND n.fabric_id <> p.fabric_id), s.slug"
    )
    if with_tenant:
        sql += f", {columns(Tenant, 't')}"
    if with_pools:
        sql += (
            f", ARRAY(SELECT DISTINCT o.pool_id FROM {members} o"  # noqa: S608
            f" WHERE o.node_id IN (SELECT m.node_id FROM {members} m WHERE m.pool_id = p.id))"
        )
    sql += (
        f" FROM {table(Pool)} p JOIN {table(Fabric)} f ON f.id = p.fabric_id"
        f" JOIN {table(DesignRevision)} r ON r.id = f.revision_id"
        f" LEFT JOIN {table(Site)} s ON s.id = f.site_id"
    )
    if with_tenant:
        sql += f" LEFT JOIN {table(Tenant)} t ON t.id = %(tenant)s"
    return sql + " WHERE p.id = %(pool)s"
