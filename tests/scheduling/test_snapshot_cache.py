"""The per-process cached pool snapshot (``scheduling.services.snapshots.lend``) is never stale in
a way that matters, on PostgreSQL with committed transactions.

"Processes" are separate caches: each test process object swaps its own cache dict in while it
acts, as a gunicorn worker and a Celery worker each hold their own. After every operation (reserve,
queue, queue pass, release, cancel, extend, node down/up, a failed GPU, pool membership) each
process's lent snapshot is compared with a fresh full load at the same instant, and decisions on
both are compared too. One test runs the writer in a real subprocess.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.utils import timezone

from console.tenancy.models import Tenant
from scheduling.models import GPU, Node, Pool, Quota, Reservation
from scheduling.services import inventory, lifecycle, snapshots
from scheduling.services.queue import queue_pass, reserve_asap
from scheduling.services.reservations import decide, preview, reserve
from tests.needs import needs
from tests.scheduling.conftest import (
    OPERATOR,
    SYSTEM,
    give_quota,
    make_fabric,
    make_pool,
    request_for,
    tenant_principal,
)

pytestmark = [pytest.mark.django_db(transaction=True), needs("postgresql")]
ROOT = Path(__file__).resolve().parents[2]


class Process:
    """One worker's cache of pool snapshots."""

    def __init__(self) -> None:
        self.cache: dict[int, object] = {}

    @contextlib.contextmanager
    def acting(self):
        saved = snapshots._cache
        snapshots._cache = self.cache
        try:
            yield
        finally:
            snapshots._cache = saved


def view(snap) -> tuple:
    """Everything of an engine state a decision can read, in a comparable form."""
    st = snap.engine.state
    bookings = sorted(
        (b.id, b.owner, b.start, b.end, tuple(sorted(b.allocations)), b.active) for b in st.bookings.values()
    )
    return (
        bookings,
        list(st.node_state),
        list(st.busy_now),
        dict(st.future),
        list(st.group_free_nodes),
        list(st.group_free_gpus),
        [dict(h) for h in st.group_holders],
        st.now,
        snap.engine.guards[0].guarantees if snap.engine.guards else None,
    )


PROBES = [dict(gpus=8), dict(gpus=32), dict(gpus=64), dict(nodes=12), dict(gpus=3, hours=5)]


def outcome(snap, tenant, pool) -> list[tuple]:
    """Decisions of a few probe requests on ``snap`` (placement nodes and GPUs, or the code)."""
    quota = Quota.objects.filter(tenant=tenant, pool=pool).first()
    found = []
    for probe in PROBES:
        probe = dict(probe)
        start = snap.now + dt.timedelta(hours=probe.pop("hours", 0))
        request = request_for(pool, start=start, duration=dt.timedelta(hours=2), **probe)
        decision = decide(snap, request, tenant, pool, quota)
        result = decision.result
        placed = (result.node_ids, result.gpu_indices, result.preempts) if decision.placed else decision.code
        found.append((decision.placed, placed))
    return found


def assert_current(process: Process, pool: Pool, tenant: Tenant, at: dt.datetime) -> None:
    """The process's lent snapshot equals a fresh load at ``at``, and decides the same."""
    pool = Pool.objects.select_related("fabric").get(pk=pool.pk)
    fresh = snapshots.snapshot(pool, at)
    with process.acting(), snapshots.lend(pool, at) as lent:
        lent.engine.state.check_invariants()
        assert view(lent) == view(fresh)
        assert outcome(lent, tenant, pool) == outcome(fresh, tenant, pool)
        assert view(lent) == view(fresh)  # deciding left both as they were


@pytest.fixture
def world():
    snapshots.forget()
    fabric = make_fabric("cache16", {"topology": "fat-tree", "nodes": 16, "node_type": "DGX-H100"})
    pool = make_pool(fabric)
    a = Tenant.objects.create(name="Alpha", slug="alpha")
    b = Tenant.objects.create(name="Beta", slug="beta")
    give_quota(a, pool, 64, borrow=64)
    give_quota(b, pool, 32, borrow=96)
    yield pool, a, b
    snapshots.forget()


def test_random_operations_keep_every_process_cache_equal_to_a_fresh_load(world):
    pool, a, b = world
    rng = random.Random(16)
    web, worker, clock = Process(), Process(), Process()
    live: list[Reservation] = []
    down: list[Node] = []
    nodes = list(Node.objects.filter(fabric=pool.fabric).order_by("pk"))
    snapshots.stats.clear()
    for step in range(36):
        acting = rng.choice([web, worker])
        tenant = rng.choice([a, b])
        op = rng.choice(["reserve", "reserve", "future", "asap", "release", "extend", "node", "gpu", "pass"])
        if step == 24:
            op = "members"
        with acting.acting():
            if op in ("reserve", "future", "asap"):
                start = None if op != "future" else timezone.now() + dt.timedelta(hours=rng.uniform(0.5, 6))
                request = request_for(
                    pool, gpus=rng.choice([1, 4, 8, 16, 32, 64]), start=start, duration=dt.timedelta(hours=2)
                )
                if op == "asap":
                    request = request_for(pool, gpus=rng.choice([32, 64, 96]), duration=dt.timedelta(hours=1))
                    made = reserve_asap(SYSTEM, tenant_principal(tenant), request)
                else:
                    made = reserve(SYSTEM, tenant_principal(tenant), request)
                if made.status in Reservation.HOLDING:
                    live.append(made)
            elif op == "release" and live:
                lifecycle.release(SYSTEM, OPERATOR, live.pop(rng.randrange(len(live))))
            elif op == "extend" and live:
                victim = Reservation.objects.get(pk=rng.choice(live).pk)
                with contextlib.suppress(Exception):  # a clash or the quota may refuse: a 409 is fine
                    lifecycle.extend(SYSTEM, OPERATOR, victim, victim.end + dt.timedelta(hours=1))
            elif op == "node":
                if down and rng.random() < 0.5:
                    inventory.set_node_state(SYSTEM, OPERATOR, down.pop(), Node.State.AVAILABLE)
                else:
                    node = rng.choice(nodes)
                    inventory.set_node_state(SYSTEM, OPERATOR, node, rng.choice([Node.State.DOWN, Node.State.DRAINING]))
                    down.append(node)
            elif op == "gpu":
                gpu = GPU.objects.filter(node__in=nodes).order_by("?").first()
                GPU.objects.filter(pk=gpu.pk).update(health=rng.choice([GPU.Health.FAILED, GPU.Health.OK]))
            elif op == "members":
                pool = Pool.objects.select_related("fabric").get(pk=pool.pk)
                inventory.set_pool_nodes(SYSTEM, OPERATOR, pool, nodes[:12])
                nodes = nodes[:12]
            else:
                queue_pass(pool.pk)
        pool = Pool.objects.select_related("fabric").get(pk=pool.pk)
        now = timezone.now()
        for process in (web, worker):
            assert_current(process, pool, tenant, now)
        # A third process only ever looks ahead in time: bookings end and start as it advances.
        assert_current(clock, pool, tenant, now + dt.timedelta(minutes=20 * (step + 1)))
    # The cache was really used: deltas and hits, not only full loads.
    assert snapshots.stats["delta"] > 10
    assert snapshots.stats["hit"] > 10


def test_a_preview_after_another_process_reserved_sees_it(world):
    pool, a, b = world
    web, worker = Process(), Process()
    with web.acting():
        assert preview(tenant_principal(a), request_for(pool, gpus=64))["placeable"]
    with worker.acting():
        reserve(SYSTEM, tenant_principal(b), request_for(pool, gpus=64))
        reserve(SYSTEM, tenant_principal(a), request_for(pool, gpus=32))
    with web.acting():
        body = preview(tenant_principal(a), request_for(pool, gpus=64))
    # 96 of 128 GPUs are taken: the web process's cached pool (loaded before) must know it.
    assert body["placeable"] is False
    assert body["rejection"]["reason"] not in ("", None)


def test_a_transaction_that_touched_the_pool_reads_its_own_writes_and_the_cache_forgets_them(world):
    pool, a, _ = world
    with snapshots.lend(pool, timezone.now()):
        pass  # the cache holds the empty pool
    with transaction.atomic():
        reserve(SYSTEM, tenant_principal(a), request_for(pool, gpus=128 - 8))
        # Its own uncommitted booking counts for this transaction (a private snapshot) ...
        assert preview(tenant_principal(a), request_for(pool, gpus=16))["placeable"] is False
        transaction.set_rollback(True)
    # ... and, rolled back, never reached the cache.
    with snapshots.lend(pool, timezone.now()) as snap:
        assert snap.engine.state.bookings == {}
    assert preview(tenant_principal(a), request_for(pool, gpus=16))["placeable"] is True


def test_a_reservation_committed_by_another_os_process_is_seen_by_the_next_reserve(world):
    pool, a, b = world
    # This process caches the pool, empty.
    assert preview(tenant_principal(a), request_for(pool, gpus=128))["placeable"] is True
    # Another OS process (its own interpreter, connection and cache) takes 32 GPUs (its guarantee).
    script = (
        "import django, json, datetime as dt; django.setup();"
        "from scheduling.services.reservations import reserve, ReservationRequest;"
        "from console.tenancy.context import Actor; from console.tenancy.models import Principal, Role;"
        f"r = reserve(Actor.system('other'), Principal(None, Role.TENANT_ADMIN, {b.pk}),"
        f" ReservationRequest(pool_id={pool.pk}, gpus=32, duration=dt.timedelta(hours=2)));"
        "print(json.dumps({'id': r.pk, 'status': r.status}))"
    )
    name = connection.settings_dict["NAME"]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings"}
    env["DATABASE_URL"] = (
        f"postgres://{connection.settings_dict['USER']}@{connection.settings_dict['HOST']}:{connection.settings_dict['PORT']}/{name}"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    other = json.loads(done.stdout.strip().splitlines()[-1])
    assert other["status"] == Reservation.Status.PROVISIONING
    # This process's next reserve decides under its locks with the other's booking in view.
    # (borrowed above Alpha's guarantee of 64: nothing of Beta's guarantee can be reclaimed)
    mine = reserve(SYSTEM, tenant_principal(a), request_for(pool, gpus=104))
    assert mine.status == Reservation.Status.REJECTED
    fits = reserve(SYSTEM, tenant_principal(a), request_for(pool, gpus=96))
    assert fits.status == Reservation.Status.PROVISIONING
    theirs = set(Reservation.objects.get(pk=other["id"]).allocations.values_list("gpu_id", flat=True))
    ours = set(fits.allocations.values_list("gpu_id", flat=True))
    assert len(theirs) == 32 and len(ours) == 96 and not theirs & ours
