"""The reserve path's merged statements read and write what the one-query-per-read path does.

``pool_reads.read_pool`` (one statement on PostgreSQL) is compared with ``read_row_by_row`` (the
ORM, one query per read: the SQLite path) and with figures computed here from the rows the test
wrote; ``snapshots.write_allocations`` (allocation rows and touch in one statement) with
``write_row_by_row``; ``pool_rows.pool_row`` (the pool with the tenant, or with the pools of
its nodes) with ``pool_row_by_row``; the SHARP holders and what a grant reads of the fabric, read
with the rest, with their reads one by one. A reserve's snapshot carries the power states and the tenant's holdings it
read, and they equal what ``power.not_on`` and ``quotas.usage`` read on their own.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from console.fabric.models import FabricPartition, FabricQos
from console.tenancy import audit
from console.tenancy.models import AuditEntry, Tenant
from scheduling.models import (
    GPU,
    BookingChange,
    BookingGeneration,
    Node,
    Quota,
    Reservation,
    ReservationAllocation,
    ReservationSubnet,
    ServiceLevels,
)
from scheduling.services import grant, lifecycle, locks, pool_reads, pool_rows, power, raw, snapshots
from scheduling.services.quotas import peak_within, usage
from scheduling.services.reservations import reserve
from tests.needs import needs
from tests.scheduling.conftest import SYSTEM, give_quota, make_pool, request_for, tenant_principal

pytestmark = [pytest.mark.django_db(transaction=True), needs("postgresql")]


@pytest.fixture
def world(pool):
    """The 16-node pool, and tenants Alpha (64 GPUs guaranteed, 64 borrowable) and Beta (32, 32)."""
    snapshots.forget()
    tenants = [Tenant.objects.create(name=slug.title(), slug=slug) for slug in ("alpha", "beta")]
    for tenant, guaranteed in zip(tenants, (64, 32), strict=True):
        give_quota(tenant, pool, guaranteed, borrow=guaranteed)
    yield pool, *tenants
    snapshots.forget()


def normal(reads: pool_reads.PoolReads) -> tuple:
    return (
        reads.generation,
        sorted(reads.changes),
        sorted(reads.rows),
        reads.states,
        reads.power,
        reads.failed,
        reads.shaped,
        None if reads.held is None else sorted(reads.held),
    )


def same(facts: grant.FabricFacts) -> tuple:
    """A grant's facts of a fabric, the SLs as a list (the one statement reads them as JSON)."""
    return facts.keys, None if facts.levels is None else list(facts.levels), facts.qos_table


def test_one_statement_reads_what_the_queries_one_by_one_read(world):
    pool, alpha, beta = world
    made = [reserve(SYSTEM, tenant_principal(alpha), request_for(pool, gpus=16)) for _ in range(2)]
    made.append(reserve(SYSTEM, tenant_principal(beta), request_for(pool, gpus=8)))
    assert all(r.status in Reservation.HOLDING for r in made)
    lifecycle.release(SYSTEM, tenant_principal(alpha), made[1])
    nodes = list(Node.objects.filter(pools=pool).order_by("pk"))
    changed_at = timezone.now().replace(microsecond=123456)
    Node.objects.filter(pk=nodes[0].pk).update(state=Node.State.DOWN)
    Node.objects.filter(pk=nodes[1].pk).update(power_state=Node.Power.OFF, power_changed_at=changed_at)
    Node.objects.filter(pk=nodes[2].pk).update(state=Node.State.DRAINING, power_state=Node.Power.POWERING_ON)
    GPU.objects.filter(node=nodes[3], index=5).update(health=GPU.Health.FAILED)
    Quota.objects.filter(tenant=beta, pool=pool).update(guaranteed_leaf_groups=1)
    now = timezone.now()
    generation = BookingGeneration.objects.get(pool=pool).generation
    assert generation >= 4  # three grants and a release

    # a SHARP holder on the fabric (one of this pool's, one of another pool's is the same row
    # shape), a partition of another source, SLs and a QoS table: what the grant reads
    Reservation.objects.filter(pk=made[0].pk).update(placement={**made[0].placement, "sharp": ["leaf-a", "leaf-b"]})
    FabricPartition.objects.create(fabric_id=pool.fabric_id, name="storage", pkey=0x0123)
    ServiceLevels.objects.update_or_create(fabric_id=pool.fabric_id, defaults={"training": 3, "inference": 4})
    FabricQos.objects.update_or_create(fabric_id=pool.fabric_id, defaults={"table": {"vl_arb_high": [[0, 64]]}})

    for since in (None, 0, generation - 1, generation):
        for tenant_id in (None, alpha.pk):
            for sharp in (None, pool.fabric_id):
                merged = pool_reads.read_pool(pool.pk, since, now, tenant_id, sharp)
                assert normal(merged) == normal(pool_reads.read_row_by_row(pool.pk, since, now, tenant_id, sharp))
                assert sorted(merged.sharp or []) == sorted(
                    pool_reads.read_row_by_row(pool.pk, since, now, tenant_id, sharp).sharp or []
                )
    holders = pool_reads.read_pool(pool.pk, 0, now, None, pool.fabric_id).sharp
    assert holders == [(made[0].pk, pool.pk, ["leaf-a", "leaf-b"], made[0].start.timestamp(), made[0].end.timestamp())]

    # What a grant reads of the fabric, read with the rest when asked, equals its own reads one by one
    with transaction.atomic():
        facts = pool_reads.read_pool(pool.pk, 0, now, alpha.pk, None, pool.fabric_id).facts
    assert facts is not None
    one_by_one = grant.fabric_facts_row_by_row([pool.fabric_id])[pool.fabric_id]
    in_one = grant._fabric_facts([pool.fabric_id])[pool.fabric_id]
    assert same(grant.fabric_facts_of(facts)) == same(one_by_one) == same(in_one)
    assert {0x0123, *(r.pkey for r in made[::2])} <= one_by_one.keys.taken
    assert same(one_by_one)[1:] == ([3, 4, 0], {"vl_arb_high": [[0, 64]]})
    assert pool_reads.read_pool(pool.pk, 0, now).facts is None  # not asked: not read

    merged = pool_reads.read_pool(pool.pk, 0, now, alpha.pk)
    assert merged.generation == generation
    expected_changes = BookingChange.objects.filter(pool=pool).values_list("generation", "reservation_id")
    assert sorted(merged.changes) == sorted(expected_changes)
    live = ReservationAllocation.objects.filter(end__gt=now).values_list("reservation_id", "node_id", "gpu__index")
    assert sorted((r, n, i) for r, n, i, *_ in merged.rows) == sorted(live)
    assert merged.states == {nodes[0].pk: "down", nodes[2].pk: "draining"}
    assert merged.power == {nodes[1].pk: ("off", changed_at.timestamp()), nodes[2].pk: ("powering-on", None)}
    assert merged.failed == {nodes[3].pk}
    assert merged.shaped == {str(beta.pk): 1}
    kept = [r for r in made if r.tenant_id == alpha.pk and r.pk != made[1].pk]
    assert sorted(merged.held or []) == sorted((r.start.timestamp(), r.end.timestamp(), r.gpus) for r in kept)
    assert pool_reads.read_pool(pool.pk, None, now).changes == []  # a full load follows: not read


def test_a_reserve_decides_on_the_power_and_usage_read_with_its_snapshot(world):
    pool, alpha, _ = world
    reserve(SYSTEM, tenant_principal(alpha), request_for(pool, gpus=24))
    off = Node.objects.filter(pools=pool).order_by("pk").first()
    Node.objects.filter(pk=off.pk).update(power_state=Node.Power.OFF, power_changed_at=timezone.now())
    now = timezone.now()
    with transaction.atomic(), snapshots.lend(pool, now, alpha.pk) as snap:
        assert snap.power == power.not_on(pool, snap.named)
        assert snap.power and set(snap.power) == {snap.named.node_pks.index(off.pk)}
        assert snap.held is not None and snap.held[0] == alpha.pk
        end = now + dt.timedelta(hours=3)
        assert peak_within(snap.held[1], now.timestamp(), end.timestamp()) == usage(alpha.pk, pool.pk, now, end) == 24


def test_a_reserve_takes_eight_statements(world):
    pool, alpha, _ = world
    principal = tenant_principal(alpha)
    reserve(SYSTEM, principal, request_for(pool, gpus=8))  # warms the cached topology and snapshot
    with CaptureQueriesContext(connection) as captured:
        made = reserve(SYSTEM, principal, request_for(pool, gpus=16))
    assert made.status in Reservation.HOLDING
    # the tenant with the pool, BEGIN, quota lock, reservation lock, the lock's re-read of the
    # pools of the pool's nodes with the pool again (under the lock), the snapshot's refresh (with
    # power, usage, the fabric's SHARP trees held: its switches are SHARP-capable, its P_Keys and
    # SLs, the new reservation's id), the reservation with its allocations, subnets, audit row and
    # the touch, COMMIT
    sqls = [q["sql"] for q in captured.captured_queries]
    assert sum("placement" in sql and "sharp" in sql for sql in sqls) == 1, sqls
    assert sum("FOR SHARE" in sql for sql in sqls) == 1, sqls  # the P_Keys, SLs and QoS table: read once
    assert len(captured.captured_queries) == 8, [q["sql"][:60] for q in captured.captured_queries]
    subnets = ReservationSubnet.objects.filter(reservation=made).values_list("fabric_id", "pkey", "sl", "pkey_live")
    assert list(subnets) == [(pool.fabric_id, made.pkey, made.sl, True)]
    row = Reservation.objects.get(pk=made.pk)
    assert audit.snapshot(row) == audit.snapshot(made)  # the row as the caller holds it
    logged = AuditEntry.objects.get(action="reservation.create", object_id=str(made.pk))
    assert logged.after == audit.snapshot(row) and logged.before is None and logged.object_repr == str(made)
    assert ReservationAllocation.objects.filter(reservation=made).count() == 16


def test_the_pool_row_reads_what_the_orm_reads(world):
    pool, alpha, _ = world
    other = make_pool(pool.fabric, "half", nodes=list(Node.objects.filter(pools=pool).order_by("pk")[:2]))
    for tenant_id, pools in ((alpha.pk, False), (None, True), (-1, False)):
        merged = pool_rows.pool_row(pool.pk, tenant_id=tenant_id, pools_of_nodes=pools)
        orm = pool_rows.pool_row_by_row(pool.pk, tenant_id=tenant_id, pools_of_nodes=pools)
        assert merged.pool is not None and orm.pool is not None
        fields = [f.attname for f in type(pool)._meta.concrete_fields]
        assert [getattr(merged.pool, f) for f in fields] == [getattr(orm.pool, f) for f in fields]
        fabric_fields = [f.attname for f in type(pool.fabric)._meta.concrete_fields]
        assert [getattr(merged.pool.fabric, f) for f in fabric_fields] == [
            getattr(orm.pool.fabric, f) for f in fabric_fields
        ]
        for name in ("revised", "foreign", "home_site"):
            assert getattr(merged.pool, name) == getattr(orm.pool, name), name
        assert merged.tenant == orm.tenant and (merged.tenant is not None) == (tenant_id == alpha.pk)
        assert merged.pools_of_nodes == orm.pools_of_nodes
    assert pool_rows.pool_row(pool.pk, pools_of_nodes=True).pools_of_nodes == {pool.pk, other.pk}
    assert pool_rows.pool_row(-1, tenant_id=alpha.pk).pool is None


def _free_cells(pool, count: int) -> list[tuple[int, int]]:
    node_ids = Node.objects.filter(pools=pool).order_by("pk").values_list("pk", flat=True)[:count]
    return list(GPU.objects.filter(node_id__in=list(node_ids)).order_by("pk").values_list("node_id", "pk"))


@pytest.mark.parametrize("writer", ["write_allocations", "write_row_by_row"])
def test_both_writers_insert_the_rows_bump_the_generation_and_refuse_an_overlap(world, writer):
    pool, alpha, _ = world
    write = getattr(snapshots, writer)
    cells = _free_cells(pool, 2)
    start = timezone.now().replace(microsecond=0) + dt.timedelta(hours=1)
    end = start + dt.timedelta(hours=2)
    before = BookingGeneration.objects.get(pool=pool).generation
    first, second = (
        Reservation.objects.create(tenant=alpha, pool=pool, fabric_id=pool.fabric_id, start=start, end=end, gpus=16)
        for _ in range(2)
    )
    with transaction.atomic():
        write(first.pk, iter(cells), start, end)
    rows = ReservationAllocation.objects.filter(reservation=first).values_list("node_id", "gpu_id", "start", "end")
    assert sorted(rows) == sorted((n, g, start, end) for n, g in cells)
    assert BookingGeneration.objects.get(pool=pool).generation == before + 1
    assert list(
        BookingChange.objects.filter(pool=pool, generation=before + 1).values_list("reservation_id", flat=True)
    ) == [first.pk]
    with pytest.raises(IntegrityError), transaction.atomic():  # the exclusion constraint
        write(second.pk, cells[:1], start + dt.timedelta(hours=1), end + dt.timedelta(hours=1))
    assert not ReservationAllocation.objects.filter(reservation=second).exists()
    assert BookingGeneration.objects.get(pool=pool).generation == before + 1

    # A new reservation's row and its audit row go in with its allocations (and fail with them)
    def new_row(cells: list[tuple[int, int]]) -> Reservation:
        with transaction.atomic():  # the id from its sequence, as reserve's snapshot takes it
            pk = pool_reads.read_pool(pool.pk, 0, timezone.now(), None, None, pool.fabric_id).reservation_id
            made = Reservation(pk=pk, tenant=alpha, pool=pool, fabric_id=pool.fabric_id, start=start, end=end, gpus=16)
            inserts = [raw.insert_of(made)]
            entry = audit.record(SYSTEM, "reservation.create", made, after=audit.snapshot(made), save=False)
            write(made.pk, iter(cells), start, end, inserts=[*inserts, raw.insert_of(entry)])
        return made

    third = new_row(_free_cells(pool, 4)[16:])
    row = Reservation.objects.get(pk=third.pk)
    assert audit.snapshot(row) == audit.snapshot(third)  # created_at and updated_at as written
    logged = AuditEntry.objects.get(action="reservation.create", object_id=str(third.pk))
    assert logged.after == audit.snapshot(row) and logged.tenant_id == alpha.pk
    assert ReservationAllocation.objects.filter(reservation=third).count() == 16
    with pytest.raises(IntegrityError):
        new_row(_free_cells(pool, 4)[16:])  # the same GPUs in the same window
    assert Reservation.objects.count() == 3 and AuditEntry.objects.filter(action="reservation.create").count() == 1


def test_the_reserve_paths_statements_are_prepared_and_djangos_are_not(world):
    """After a few reserves on one connection, PostgreSQL holds the reserve path's statements of
    cached text as prepared statements (no parse and plan per run), each reserve still places and
    writes what it should; the ORM's statements are not prepared."""
    pool, alpha, _ = world
    principal = tenant_principal(alpha)
    threshold = connection.settings_dict["OPTIONS"]["prepare_threshold"]
    assert isinstance(threshold, int)
    for _ in range(threshold + 2):
        made = reserve(SYSTEM, principal, request_for(pool, gpus=16))
        assert made.status in Reservation.HOLDING
        assert ReservationAllocation.objects.filter(reservation=made).count() == 16
        lifecycle.release(SYSTEM, principal, made)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]

    def held(sql: str) -> bool:
        head = sql.split("%")[0]  # up to the first parameter: psycopg sends $1 … in their place
        return any(text.startswith(head) for text in prepared)

    assert held(pool_rows._statement(True, False)), prepared  # the pool with the tenant
    assert held(pool_rows._statement(False, True)), prepared  # with the pools of its nodes (under the lock)
    assert held(locks._members_lock_statement()), prepared
    assert held(pool_reads._statement()), prepared
    assert any(text.startswith("WITH row0 AS (INSERT INTO") for text in prepared), prepared  # the grant's write
    assert held(locks._quota_statement()), prepared
    # the ORM's count of the allocations above ran as often, unprepared
    assert not any(text.startswith("SELECT COUNT(*)") for text in prepared), prepared
