"""Start-up recovery (issue 14, finding 8): what a crash left in flight is driven on within 30 s
of the service coming back, not when the periodic tick's stuck detection gets to it minutes later.

Real processes: a Celery worker on a private Redis, the lab fabric (OpenSM on ibsim); no beat
runs, so nothing but the start-up recovery can move the reservation.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest
from celery import Celery

from console.fabric.models import ChangeRequest, ChangeStep
from scheduling.models import Reservation
from scheduling.services.reservations import ReservationRequest, reserve
from tests.fabric.conftest import requires_lab
from tests.needs import needs
from tests.reliability.stack import ACTOR, OPERATOR, Stack, lab_pool, wait_for

pytestmark = [
    requires_lab,
    needs("postgresql"),
    pytest.mark.lab,
    pytest.mark.timeout(240),
    pytest.mark.django_db(transaction=True),
]
S = Reservation.Status
#: The issue's bound: ready (or final) within 30 s of the service coming back.
RECOVERY_S = 30.0


@pytest.fixture
def stack(tmp_path, tenant_a):
    pool = lab_pool(tmp_path / "lab", [tenant_a])
    stack = Stack(tmp_path / "stack", fabric=pool.fabric)
    yield stack, pool
    stack.stop()
    pool.stop()


def book(pool, tenant, gpus: int = 16) -> Reservation:
    request = ReservationRequest(pool_id=pool.pk, gpus=gpus, duration=dt.timedelta(hours=2), tenant_id=tenant.pk)
    reservation = reserve(ACTOR, OPERATOR, request)
    assert reservation.status == S.PROVISIONING, reservation.reason
    return reservation


def status_of(reservation: Reservation) -> str:
    return Reservation.objects.values_list("status", flat=True).get(pk=reservation.pk)


def test_a_reservation_whose_reconcile_was_lost_is_ready_within_30_s_of_the_worker_starting(stack, tenant_a):
    stack, pool = stack
    # given a committed reservation whose fabric.reconcile message never reached this broker (as
    # when the web process dies between commit and publish, or the embedded in-memory broker dies)
    reservation = book(pool.pool, tenant_a)
    stack.start("worker")  # (the test process published to its own Redis, not the private one)
    # when the worker has started, then the reservation is ready within 30 s, with no beat
    started = time.monotonic()
    wait_for(lambda: status_of(reservation) == S.READY, timeout=RECOVERY_S, what="ready after start-up")
    print(f"ready {time.monotonic() - started:.1f} s after the worker was up")


def test_a_push_killed_mid_change_resumes_within_30_s_of_the_worker_restarting(stack, tenant_a):
    stack, pool = stack
    # given a push paused after the swap and before OpenSM reads it, on worker "chaos"
    pool.fabric.config = {**(pool.fabric.config or {}), "test_hooks": {"pause_before": {"reload": 120}}}
    pool.fabric.save(update_fields=["config"])
    stack.start("worker")
    reservation = book(pool.pool, tenant_a)
    # not the thread's current app: the console's services publish through celery.current_app
    broker = Celery(broker=stack.redis.url, set_as_current=False)
    broker.send_task("fabric.reconcile", kwargs={"fabric_id": pool.fabric.pk}, queue="console")
    wait_for(
        lambda: ChangeStep.objects.filter(change__fabric=pool.fabric, name="reload", status="running").exists(),
        timeout=60,
        what="push paused before reload",
    )
    change = ChangeRequest.objects.get(fabric=pool.fabric, status="applying")
    assert change.lease_expires_at is not None and change.lease_owner.startswith("chaos@")
    # when the worker is killed -9 while its lease still lives (two minutes) and comes back
    stack.processes["worker"].kill9()
    stack.restart("worker")
    started = time.monotonic()
    # then the change resumes at once (attempt 2 does not pause) and the reservation is ready
    wait_for(lambda: status_of(reservation) == S.READY, timeout=RECOVERY_S, what="ready after restart")
    took = time.monotonic() - started
    change.refresh_from_db()
    assert change.status == "applied" and change.attempts == 2, (change.status, change.attempts, change.error)
    assert dt.datetime.now(dt.UTC) < change.created_at + dt.timedelta(seconds=120)  # not the lease's expiry
    print(f"ready {took:.1f} s after the worker came back")
