"""The reservation lock (one row per pool, ``scheduling.services.locks.reservation_lock``) under
real transactions on PostgreSQL: two reservations racing for a pool's last free nodes are decided
one after the other (one placed, one rejected, no constraint violation left for the database to
catch), and the lock covers the pools sharing a node and a node's own writers."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Sequence

import pytest
from django.db import OperationalError, connection, connections, transaction

from console.tenancy.models import Tenant
from scheduling.models import Node, Reservation
from scheduling.services import inventory, lifecycle, locks, queue
from scheduling.services.reservations import reserve
from tests.needs import needs
from tests.scheduling.conftest import OPERATOR, SYSTEM, give_quota, make_fabric, make_pool, request_for
from tests.scheduling.test_concurrency import assert_no_overlapping_allocations

pytestmark = [pytest.mark.django_db(transaction=True), needs("postgresql")]
S = Reservation.Status


def test_two_reservations_race_for_the_last_nodes_one_is_placed(caplog):
    # given a 4-node pool (32 GPUs) whose first two nodes are held
    fabric = make_fabric("last-nodes", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    pool = make_pool(fabric)
    holder = Tenant.objects.create(name="Holder", slug="holder")
    give_quota(holder, pool, 16)
    held = reserve(SYSTEM, OPERATOR, request_for(pool, gpus=16, tenant_id=holder.pk))
    assert held.status == S.PROVISIONING
    racers = []
    for i in range(2):
        tenant = Tenant.objects.create(name=f"Racer {i}", slug=f"racer-{i}")
        give_quota(tenant, pool, 0, borrow=32)
        racers.append(tenant)
    caplog.set_level(logging.INFO, logger="scheduling.services.reservations")
    for round_ in range(2):
        # when both ask for the 16 GPUs left at the same instant
        made = race(pool, racers)
        # then one is placed on the two free nodes and the other is rejected for capacity
        statuses = sorted(Reservation.objects.get(pk=r.pk).status for r in made)
        assert statuses == sorted([S.PROVISIONING, S.REJECTED]), (round_, statuses)
        winner = next(r for r in made if r.status == S.PROVISIONING)
        assert_no_overlapping_allocations()
        lifecycle.release(SYSTEM, OPERATOR, winner)
    # and the loser was decided after the winner committed: never a constraint violation to retry
    assert not [r for r in caplog.records if "retry" in r.getMessage()]


def race(pool, tenants: list[Tenant]) -> list[Reservation]:
    """Each tenant reserves 16 GPUs of ``pool`` from its own thread and connection, while a third
    connection holds the pool's reservation lock until every racer waits on it (read in
    ``pg_stat_activity``), so they contend for certain; then it lets them go."""
    made: list[Reservation] = []
    errors: list[BaseException] = []

    def run(tenant: Tenant) -> None:
        try:
            made.append(reserve(SYSTEM, OPERATOR, request_for(pool, gpus=16, tenant_id=tenant.pk)))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    def all_waiting() -> None:
        deadline = time.monotonic() + 60
        with connection.cursor() as cursor:
            while time.monotonic() < deadline:
                cursor.execute("SELECT pg_stat_clear_snapshot()")  # read afresh inside the transaction
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query ILIKE %s",
                    ["%scheduling_bookinggeneration%FOR UPDATE%"],
                )
                if cursor.fetchone()[0] == len(tenants):
                    return
                time.sleep(0.05)
            cursor.execute(
                "SELECT pid, pg_blocking_pids(pid), wait_event_type, state, right(query, 250) FROM pg_stat_activity "
                "WHERE datname = current_database()"
            )
            seen = cursor.fetchall()
        raise AssertionError(f"the racers never waited on the reservation lock: {seen}")

    threads = [threading.Thread(target=run, args=(t,)) for t in tenants]
    blocked = _held_elsewhere(lambda: locks.reservation_lock(pool_ids=[pool.pk]), all_waiting, before=threads)
    for t in threads:
        t.join(timeout=120)
    assert blocked is None, blocked
    assert not errors, errors
    return made


def _held_elsewhere(take, attempt, before: Sequence[threading.Thread] = ()) -> BaseException | None:
    """Run ``take`` in a second connection's transaction and, while it holds its locks, start
    ``before`` and run ``attempt`` in this connection with a short lock timeout; returns what
    ``attempt`` raised (``None``: it went through)."""
    taken, done = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def holder() -> None:
        try:
            with transaction.atomic():
                take()
                taken.set()
                done.wait(timeout=60)
        except BaseException as exc:
            failures.append(exc)
            taken.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert taken.wait(timeout=60)
        assert not failures, failures
        for t in before:
            t.start()
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '200ms'")
                attempt()
        except OperationalError as exc:
            return exc
        return None
    finally:
        done.set()
        thread.join(timeout=60)


def test_the_lock_covers_pools_sharing_a_node_and_the_nodes_writers():
    fabric = make_fabric("shared-nodes", {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"})
    nodes = list(Node.objects.filter(fabric=fabric).order_by("pk"))
    big = make_pool(fabric, "big", nodes=nodes)
    half = make_pool(fabric, "half", nodes=nodes[:4])
    apart = make_pool(fabric, "apart", nodes=nodes[4:5])
    # a reserve on "half" locks "big" (they share nodes) but not "apart" (it shares one with big only)
    with transaction.atomic():
        assert locks.pool_and_overlapping_lock(half.pk) == sorted([big.pk, half.pk])
    blocked = _held_elsewhere(
        lambda: locks.pool_and_overlapping_lock(half.pk), lambda: locks.reservation_lock(pool_ids=[big.pk])
    )
    assert blocked is not None and "lock timeout" in str(blocked)
    free = _held_elsewhere(
        lambda: locks.pool_and_overlapping_lock(half.pk), lambda: locks.reservation_lock(pool_ids=[apart.pk])
    )
    assert free is None
    # a node's writer (its state, its power) waits for a placement on any pool holding it
    blocked = _held_elsewhere(
        lambda: locks.pool_and_overlapping_lock(big.pk), lambda: locks.node_for_update(nodes[5].pk)
    )
    assert blocked is not None and "lock timeout" in str(blocked)


@pytest.mark.parametrize("path", ["reserve", "release", "extend", "queue_pass", "node_state"])
def test_every_writer_of_bookings_or_node_availability_waits_for_the_reservation_lock(path):
    # given a pool with one live reservation of a tenant, and the pool's lock held elsewhere
    fabric = make_fabric(f"writers-{path}", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    pool = make_pool(fabric)
    tenant = Tenant.objects.create(name="Writer", slug="writer")
    give_quota(tenant, pool, 32)
    live = reserve(SYSTEM, OPERATOR, request_for(pool, gpus=8, tenant_id=tenant.pk))
    assert live.status == S.PROVISIONING
    attempts = {
        "reserve": lambda: reserve(SYSTEM, OPERATOR, request_for(pool, gpus=8, tenant_id=tenant.pk)),
        "release": lambda: lifecycle.release(SYSTEM, OPERATOR, live),
        "extend": lambda: lifecycle.extend(SYSTEM, OPERATOR, live, live.end + dt.timedelta(hours=1)),
        "queue_pass": lambda: queue.queue_pass(pool.pk),
        "node_state": lambda: inventory.set_node_state(
            SYSTEM, OPERATOR, Node.objects.filter(fabric=fabric).first(), Node.State.DRAINING
        ),
    }
    # when the path runs, then it waits for the lock (here: gives up after the lock timeout)
    blocked = _held_elsewhere(lambda: locks.reservation_lock(pool_ids=[pool.pk]), attempts[path])
    assert blocked is not None and "lock timeout" in str(blocked), blocked
    # and once the lock is free it goes through
    attempts[path]()
