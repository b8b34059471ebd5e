"""The reservation locks' order under real PostgreSQL transactions in threads: a writer never
locks or bumps a pool's lock row after a higher one, so two writers never wait on each other in
opposite orders. Each scenario is staged so that a writer that took a pool out of order meets
one that took them in order: the database then detects a deadlock (``40P01``). Waits are seen in
``pg_blocking_pids``; a ``lock_timeout`` ends any wait the scenario did not plan."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection, connections, transaction
from django.db.models import F

from console.tenancy.models import Tenant
from scheduling.models import BookingGeneration, Node, Pool, Reservation, ReservationAllocation
from scheduling.services import inventory, lifecycle, locks, queue
from scheduling.services.reservations import reserve
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
from tests.scheduling.test_concurrency import assert_no_overlapping_allocations
from tests.scheduling.test_reservation_lock import _held_elsewhere

pytestmark = [pytest.mark.django_db(transaction=True), needs("postgresql")]
S = Reservation.Status
WAIT = 30  # seconds: the longest any planned wait may take (a lock wait, a thread's join)


class Session(threading.Thread):
    """``body`` in a thread with its own connection (lock_timeout set: never a hang); records its
    backend's pid and whatever it raised."""

    def __init__(self, body: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self.body = body
        self.pid: int | None = None
        self.started_pid = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute(f"SET lock_timeout = '{WAIT}s'")
                cursor.execute("SELECT pg_backend_pid()")
                self.pid = cursor.fetchone()[0]
            self.started_pid.set()
            self.body()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.started_pid.set()
            connections.close_all()


def started(body: Callable[[], object]) -> Session:
    session = Session(body)
    session.start()
    return session


def in_order_writer(*pools: Pool) -> Session:
    """A started session that locks ``pools`` in one call (key order) and commits: any writer of them."""

    def body() -> None:
        with transaction.atomic():
            assert locks.reservation_lock(pool_ids=[p.pk for p in pools]) == sorted(p.pk for p in pools)

    return started(body)


def held_open(body: Callable[[], object]) -> tuple[Session, threading.Event]:
    """A started session that runs ``body`` in a transaction and keeps it open (its locks held)
    until the returned event is set; returns once ``body`` has run."""
    ready, go = threading.Event(), threading.Event()

    def run() -> None:
        with transaction.atomic():
            body()
            ready.set()
            assert go.wait(WAIT)

    session = started(run)
    assert ready.wait(WAIT)
    return session, go


def wait_blocked_by(session: Session, count: int = 1) -> None:
    """Until ``count`` other backends wait on a lock ``session`` holds."""
    assert session.started_pid.wait(WAIT) and session.pid is not None
    deadline = time.monotonic() + WAIT
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT pg_stat_clear_snapshot()")  # read afresh inside a transaction
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [session.pid])
            if cursor.fetchone()[0] >= count:
                return
            time.sleep(0.02)
    raise AssertionError(f"nobody waited on backend {session.pid}")


def finish(*sessions: Session) -> None:
    for session in sessions:
        session.join(WAIT * 2)
        assert not session.is_alive()
    errors = [s.error for s in sessions if s.error is not None]
    assert not errors, errors


def test_cancel_waiting_while_its_request_is_placed_locks_the_pools_it_was_placed_on():
    # given pools "low" and "high" sharing two nodes ("low" has the lower key), a request of
    # "high" queued behind a holder that has just released them
    fabric = make_fabric("cancel-queued", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    shared = list(Node.objects.filter(fabric=fabric).order_by("pk"))[:2]
    low, high = make_pool(fabric, "low", nodes=shared), make_pool(fabric, "high", nodes=shared)
    assert low.pk < high.pk
    holder, waiter = Tenant.objects.create(name="Holder", slug="holder"), Tenant.objects.create(name="W", slug="w")
    give_quota(holder, high, 16)
    give_quota(waiter, high, 0, borrow=16)
    held = reserve(SYSTEM, OPERATOR, request_for(high, gpus=16, tenant_id=holder.pk))
    queued = queue.reserve_asap(SYSTEM, OPERATOR, request_for(high, gpus=16, tenant_id=waiter.pk))
    assert queued.status == S.QUEUED
    lifecycle.release(SYSTEM, OPERATOR, held)
    placed, go, let_go = threading.Event(), threading.Event(), threading.Event()

    def queue_pass() -> None:  # places the request, holding both pools' locks until told to commit
        with transaction.atomic():
            locks.pool_and_overlapping_lock(high.pk)
            assert queue.queue_pass(high.pk)["placed"] == 1
            placed.set()
            assert go.wait(WAIT)

    def row_holder() -> None:  # a writer of the request's row alone (as the fabric's verification)
        with transaction.atomic():
            locks.reservation_for_update(queued.pk)
            assert let_go.wait(WAIT)

    passer = started(queue_pass)
    assert placed.wait(WAIT)
    # when the tenant cancels the request it saw queued (no allocations yet) while the pass
    # that placed it has not committed, its row is held a little longer once the pass commits,
    # and another writer of both pools comes in meanwhile
    canceller = started(lambda: lifecycle.cancel(SYSTEM, OPERATOR, queued))
    wait_blocked_by(passer)
    holder_of_row = started(row_holder)
    wait_blocked_by(passer, count=2)
    go.set()
    wait_blocked_by(holder_of_row)  # the cancel holds its pool locks and waits for the row
    writer = in_order_writer(low, high)
    wait_blocked_by(canceller)
    let_go.set()
    # then nobody deadlocks: the cancel locked "low" too before it waited for the row
    finish(passer, holder_of_row, canceller, writer)
    queued.refresh_from_db()
    assert queued.status == S.CANCELLED
    assert not ReservationAllocation.objects.filter(reservation=queued, end__gt=queued.ended_at).exists()


def test_preempting_a_reservation_that_holds_nodes_of_other_pools_locks_them_first(caplog):
    # given a chain of pools on four nodes: "far" (n2, n3; created first: the lowest key),
    # "claimed" (n0, n1) and "between" (n1, n2); a borrower holds n1 and n2 through "between"
    fabric = make_fabric("preempt-chain", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    n = list(Node.objects.filter(fabric=fabric).order_by("pk"))[:4]
    far = make_pool(fabric, "far", nodes=[n[2], n[3]])
    claimed = make_pool(fabric, "claimed", nodes=[n[0], n[1]])
    between = make_pool(fabric, "between", nodes=[n[1], n[2]])
    borrower, owner = Tenant.objects.create(name="B", slug="b"), Tenant.objects.create(name="O", slug="o")
    give_quota(borrower, between, 0, borrow=16)
    give_quota(owner, claimed, 16)
    victim = reserve(SYSTEM, OPERATOR, request_for(between, gpus=16, tenant_id=borrower.pk))
    assert victim.status == S.PROVISIONING and victim.borrowed
    assert set(victim.allocations.values_list("node_id", flat=True)) == {n[1].pk, n[2].pk}
    made: list[Reservation] = []
    reached = threading.Event()

    def far_writer() -> None:  # holds "far", then needs "claimed": key order
        with transaction.atomic():
            locks.reservation_lock(pool_ids=[far.pk])
            reached.set()
            wait_blocked_by(writer)
            locks.reservation_lock(pool_ids=[claimed.pk])

    writer = Session(far_writer)  # assigned before it runs: the body waits on its own backend
    writer.start()
    assert reached.wait(WAIT)
    caplog.set_level(logging.INFO, logger="scheduling.services.reservations")
    # when the owner claims its guarantee on "claimed", which preempts the borrower (whose
    # wind-down frees n2, a node of "far" as well)
    claimer = started(lambda: made.append(reserve(SYSTEM, OPERATOR, request_for(claimed, gpus=16, tenant_id=owner.pk))))
    # then it takes "far" with the others, in key order, before it bumps any: no deadlock
    finish(writer, claimer)
    assert not [r.getMessage() for r in caplog.records if "deadlock" in r.getMessage()]
    assert made[0].status == S.PROVISIONING
    victim.refresh_from_db()
    assert victim.status == S.PREEMPTED
    assert_no_overlapping_allocations()


@pytest.mark.parametrize("change", ["adds", "removes"])
def test_a_pool_membership_change_waits_for_the_pools_of_the_nodes_it_moves(change):
    # given pool "mine" (n0, n1) and pool "other" holding n2 (added) or n1 (removed) too
    fabric = make_fabric(f"members-{change}", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    n = list(Node.objects.filter(fabric=fabric).order_by("pk"))[:3]
    mine = make_pool(fabric, "mine", nodes=[n[0], n[1]])
    other = make_pool(fabric, "other", nodes=[n[2]] if change == "adds" else [n[1], n[2]])
    new_members = [n[0], n[1], n[2]] if change == "adds" else [n[0]]
    # when the membership changes while a booking through "other" holds its lock
    blocked = _held_elsewhere(
        lambda: locks.reservation_lock(pool_ids=[other.pk]),
        lambda: inventory.set_pool_nodes(SYSTEM, OPERATOR, mine, new_members),
    )
    # then the change waits for it (gives up after the lock timeout), and goes through after
    assert blocked is not None and "lock timeout" in str(blocked), blocked
    inventory.set_pool_nodes(SYSTEM, OPERATOR, mine, new_members)
    assert set(mine.nodes.values_list("pk", flat=True)) == {x.pk for x in new_members}


def test_every_pool_has_its_lock_row_however_it_is_created():
    fabric = make_fabric("lock-rows", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    pool = Pool.objects.create(fabric=fabric, name="plain")
    assert BookingGeneration.objects.filter(pool=pool, generation=0).exists()


def test_a_pool_without_a_lock_row_is_still_locked_through_its_nodes():
    # given a pool made by bulk_create (no signal: no lock row) holding a node
    fabric = make_fabric("bulk-pool", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    node = Node.objects.filter(fabric=fabric).first()
    (pool,) = Pool.objects.bulk_create([Pool(fabric=fabric, name="bulk")])
    pool.nodes.add(node)
    assert not BookingGeneration.objects.filter(pool=pool).exists()
    # when a node's writer holds the lock of the node's pools, then a writer of the pool waits
    blocked = _held_elsewhere(
        lambda: locks.node_for_update(node.pk), lambda: locks.reservation_lock(pool_ids=[pool.pk])
    )
    assert blocked is not None and "lock timeout" in str(blocked), blocked
    assert BookingGeneration.objects.filter(pool=pool).count() == 1


def _add_node(low: Pool, high: Pool, node: Node) -> None:
    """A membership change adding ``node`` to ``low`` under both pools' locks (as set_pool_nodes takes them)."""
    locks.reservation_lock(pool_ids=[low.pk, high.pk])
    low.nodes.add(node)


def test_a_lock_waiting_while_another_pool_gains_a_node_of_the_pool_locks_that_pool_too():
    # given pools "low" (n0) and "high" (n1), and a membership change that adds n1 to "low"
    # under both pools' locks (as set_pool_nodes takes them), not committed yet
    fabric = make_fabric("gains-node", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    n = list(Node.objects.filter(fabric=fabric).order_by("pk"))[:2]
    low, high = make_pool(fabric, "low", nodes=[n[0]]), make_pool(fabric, "high", nodes=[n[1]])
    locked: list[list[int]] = []

    def booking_of_high() -> None:  # what reserve and the queue pass take for "high"
        with transaction.atomic():
            locked.append(locks.pool_and_overlapping_lock(high.pk))

    changer, go = held_open(lambda: _add_node(low, high, n[1]))
    # when a booking of "high" waits for its lock, and another writer of both pools after it
    booking = started(booking_of_high)
    wait_blocked_by(changer)
    writer = in_order_writer(low, high)
    wait_blocked_by(changer, count=2)
    go.set()
    # then the booking holds "low" too (n1 is a node of both now), and nobody deadlocks
    finish(changer, booking, writer)
    assert locked == [[low.pk, high.pk]]


def test_a_reserve_waiting_while_its_pool_loses_a_node_never_places_on_that_node():
    # given pool "mine" of two 8-GPU nodes, and a membership change that takes n1 out of it under
    # the pool's lock (as set_pool_nodes does), not committed yet
    fabric = make_fabric("loses-node", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    n = list(Node.objects.filter(fabric=fabric).order_by("pk"))[:2]
    mine = make_pool(fabric, "mine", nodes=n)
    tenant = Tenant.objects.create(name="Alpha", slug="alpha-loses")
    give_quota(tenant, mine, 16)
    made: list[Reservation] = []

    def membership() -> None:
        locks.reservation_lock(pool_ids=[mine.pk], node_ids=[n[1].pk])
        mine.nodes.remove(n[1])
        Pool.objects.filter(pk=mine.pk).update(version=F("version") + 1)

    def booking() -> None:  # reads the pool (two nodes) before it waits for the lock
        made.append(reserve(SYSTEM, tenant_principal(tenant), request_for(mine, gpus=16)))

    changer, go = held_open(membership)
    # when a 16-GPU reserve waits for the pool's lock and the change then commits
    waiting = started(booking)
    wait_blocked_by(changer)
    go.set()
    finish(changer, waiting)
    # then it decided on the pool as it is now (one node: 16 GPUs do not fit), never booking n1
    (reservation,) = made
    assert reservation.status == S.REJECTED, reservation.status
    assert not ReservationAllocation.objects.filter(node=n[1]).exists()


def test_a_restarting_lock_names_the_grown_set_instead_of_taking_a_savepoint():
    # given pools "low" (n0) and "high" (n1), and a membership change adding n1 to "low" under
    # both pools' locks, not committed yet
    fabric = make_fabric("grows-restart", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    n = list(Node.objects.filter(fabric=fabric).order_by("pk"))[:2]
    low, high = make_pool(fabric, "low", nodes=[n[0]]), make_pool(fabric, "high", nodes=[n[1]])
    raised: list[BaseException] = []

    def booking_of_high() -> None:  # reserve's way: no savepoint, restart with the union
        try:
            with transaction.atomic():
                locks.pool_and_overlapping_lock(high.pk, restart=True)
        except locks.WiderLock as exc:
            raised.append(exc)

    changer, go = held_open(lambda: _add_node(low, high, n[1]))
    booking = started(booking_of_high)
    wait_blocked_by(changer)
    go.set()
    finish(changer, booking)
    # then it gave its lock back (rolled back) naming both pools: the retry locks them in one call
    (exc,) = raised
    assert isinstance(exc, locks.WiderLock) and exc.pools == {low.pk, high.pk}


def test_a_qos_table_change_waits_for_a_grant_that_read_the_old_table():
    from console.fabric.changes.qos import set_qos_table
    from console.fabric.opensm.qos_table import DEFAULT_TABLE
    from scheduling.services import grant

    # given a fabric with a saved QoS table, and a grant that has read it (not committed yet)
    fabric = make_fabric("qos-grant", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    set_qos_table(SYSTEM, OPERATOR, fabric, DEFAULT_TABLE.to_json())
    granter, go = held_open(lambda: grant._fabric_facts([fabric.pk]))
    # when an operator saves a new table meanwhile
    changer = started(lambda: set_qos_table(SYSTEM, OPERATOR, fabric, DEFAULT_TABLE.to_json()))
    # then the change waits for the grant (its SL check must see the grant's reservation)
    wait_blocked_by(granter)
    go.set()
    finish(granter, changer)
