"""Booking storms on PostgreSQL with real transactions: threads released together by a barrier,
each with its own connection. Exactly one winner per contested slot, 409 (never 500) for the
losers, and a quota that holds under concurrency. Ends by checking the database invariants."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from console.tenancy.models import Role, Tenant
from scheduling.models import GPU, Node, Reservation, ReservationAllocation
from tests.needs import needs
from tests.scheduling.conftest import give_quota, make_fabric, make_pool

pytestmark = [
    pytest.mark.django_db(transaction=True),
    needs("postgresql"),
]
THREADS = 16


def storm(clients, payload) -> list[int]:
    """POST ``payload`` from every client at once; returns the status codes."""
    barrier = threading.Barrier(len(clients))
    codes: list[int] = []
    lock = threading.Lock()

    def run(client) -> None:
        try:
            barrier.wait(timeout=30)
            response = client.post("/api/reservations/", payload, format="json")
            with lock:
                codes.append(response.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return codes


def assert_no_overlapping_allocations() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT count(*) FROM scheduling_reservationallocation a
               JOIN scheduling_reservationallocation b
                 ON a.gpu_id = b.gpu_id AND a.id < b.id
                AND a.start < b."end" AND b.start < a."end" """
        )
        assert cursor.fetchone()[0] == 0


@pytest.fixture
def one_node_pool():
    fabric = make_fabric("storm", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    return make_pool(fabric, "contested", nodes=[Node.objects.filter(fabric=fabric).first()])


def test_sixteen_tenants_one_slot_exactly_one_winner(one_node_pool, make_user, client_for):
    # given 16 tenants, each allowed to borrow the pool's only node
    clients = []
    for i in range(THREADS):
        tenant = Tenant.objects.create(name=f"Storm {i}", slug=f"storm-{i}")
        give_quota(tenant, one_node_pool, 0, borrow=8)
        clients.append(client_for(make_user(f"storm-{i}", Role.TENANT_ADMIN, tenant)))
    start = timezone.now() + dt.timedelta(hours=1)
    payload = {
        "pool": one_node_pool.pk,
        "gpus": 8,
        "start": start.isoformat(),
        "end": (start + dt.timedelta(hours=2)).isoformat(),
    }
    # when all 16 ask for it at the same instant
    codes = storm(clients, payload)
    # then exactly one wins and the other 15 are told 409
    assert sorted(codes) == [201] + [409] * (THREADS - 1)
    assert Reservation.objects.filter(status=Reservation.Status.PLACED).count() == 1
    assert ReservationAllocation.objects.count() == 8
    assert_no_overlapping_allocations()


def test_quota_of_four_lets_exactly_four_through(make_user, client_for):
    fabric = make_fabric("quota-storm", {"topology": "fat-tree", "nodes": 16, "node_type": "DGX-H100"})
    pool = make_pool(fabric)
    tenant = Tenant.objects.create(name="Greedy", slug="greedy")
    give_quota(tenant, pool, 4)
    users = [make_user(f"greedy-{i}", Role.TENANT_MEMBER, tenant) for i in range(THREADS)]
    codes = storm([client_for(u) for u in users], {"pool": pool.pk, "gpus": 1, "duration_minutes": 60})
    assert sorted(codes) == [201] * 4 + [409] * (THREADS - 4)
    live = Reservation.objects.live().filter(tenant=tenant)
    assert sum(r.gpus for r in live) == 4
    assert_no_overlapping_allocations()


def test_the_exclusion_constraint_refuses_an_overlap_the_service_never_saw(one_node_pool):
    # given one committed allocation of GPU 0 over [t, t+2h)
    tenant = Tenant.objects.create(name="Raw", slug="raw")
    gpu = GPU.objects.filter(node__pools=one_node_pool, index=0).get()
    start = timezone.now() + dt.timedelta(hours=1)

    def row(offset_h: float, length_h: float) -> ReservationAllocation:
        res = Reservation.objects.create(
            tenant=tenant,
            pool=one_node_pool,
            fabric_id=one_node_pool.fabric_id,
            start=start,
            end=start + dt.timedelta(hours=3),
            status="placed",
        )
        a = start + dt.timedelta(hours=offset_h)
        return ReservationAllocation(
            reservation=res, node=gpu.node, gpu=gpu, start=a, end=a + dt.timedelta(hours=length_h)
        )

    row(0, 2).save()
    # when a writer bypassing every lock inserts an overlapping one
    with pytest.raises(IntegrityError), transaction.atomic():
        row(1, 2).save()
    # then back-to-back half-open windows are fine
    row(2, 1).save()
    assert_no_overlapping_allocations()
