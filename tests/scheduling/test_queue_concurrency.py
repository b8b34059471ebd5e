"""The queue under real transactions on PostgreSQL: concurrent queue passes place each queued
request exactly once, and a release publishes a pass that a real Celery worker runs, placing the
queued request without anyone touching it."""

from __future__ import annotations

import threading
import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.db import connection

from console.celery import app
from console.tenancy.models import AuditEntry, Tenant
from scheduling.models import Reservation, ReservationAllocation
from scheduling.services import lifecycle, queue
from tests.needs import needs
from tests.scheduling.conftest import OPERATOR, SYSTEM, give_quota, make_fabric, make_pool, request_for
from tests.scheduling.test_concurrency import assert_no_overlapping_allocations

pytestmark = [pytest.mark.django_db(transaction=True), needs("postgresql")]
S = Reservation.Status
PASSES = 4


def blocked_queue(queued: int, gpus: int = 16):
    """A 128-GPU pool held whole by one tenant, and ``queued`` asap requests of another."""
    fabric = make_fabric("queue-storm", {"topology": "fat-tree", "nodes": 16, "node_type": "DGX-H100"})
    pool = make_pool(fabric)
    holder = Tenant.objects.create(name="Holder", slug="holder")
    waiter = Tenant.objects.create(name="Waiter", slug="waiter")
    give_quota(holder, pool, 128)
    give_quota(waiter, pool, 0, borrow=128)
    from scheduling.services.reservations import reserve

    blocker = reserve(SYSTEM, OPERATOR, request_for(pool, gpus=128, tenant_id=holder.pk))
    assert blocker.status == S.PROVISIONING
    waiting = [
        queue.reserve_asap(SYSTEM, OPERATOR, request_for(pool, gpus=gpus, tenant_id=waiter.pk)) for _ in range(queued)
    ]
    assert {r.status for r in waiting} == {S.QUEUED}
    return pool, blocker, waiting


def test_concurrent_queue_passes_place_each_request_once():
    pool, blocker, waiting = blocked_queue(6)
    lifecycle.release(SYSTEM, OPERATOR, blocker)
    barrier = threading.Barrier(PASSES)
    results: list[dict[str, int]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(timeout=30)
            results.append(queue.queue_pass(pool.pk))
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(PASSES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert sum(r["placed"] for r in results) == 6
    ids = [r.pk for r in waiting]
    assert set(Reservation.objects.filter(pk__in=ids).values_list("status", flat=True)) == {S.PROVISIONING}
    assert AuditEntry.objects.filter(action="reservation.place").count() == 6
    assert ReservationAllocation.objects.filter(reservation_id__in=ids).count() == 6 * 16
    assert_no_overlapping_allocations()


@pytest.fixture
def worker():
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30) as w:
        yield w


def test_release_publishes_a_pass_the_worker_runs(worker):
    assert not app.conf.task_always_eager
    pool, blocker, (waiting,) = blocked_queue(1, gpus=64)
    lifecycle.release(SYSTEM, OPERATOR, blocker)
    deadline = time.monotonic() + 30
    while Reservation.objects.get(pk=waiting.pk).status == S.QUEUED and time.monotonic() < deadline:
        time.sleep(0.1)
    placed = Reservation.objects.get(pk=waiting.pk)
    assert placed.status in (S.PROVISIONING, S.READY)
    entry = AuditEntry.objects.get(action="reservation.place", object_id=str(waiting.pk))
    assert entry.actor_label == "task:scheduling.queue_pass"
