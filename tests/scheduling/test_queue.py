"""The reservation queue through the API: ``start: "asap"`` → queued (estimated start, position)
→ placed by the queue pass when capacity frees; cancellation while queued; queued GPUs apart
from quota use; patience (packed before ``max_wait``, wider after, on a controlled clock).

The 16-node fat tree of ``conftest``: 4 leaf groups of 4 DGX H100 (32 GPUs each), 128 GPUs.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from console.tenancy.models import AuditEntry
from scheduling.models import Node, Reservation, ReservationAllocation
from scheduling.services import lifecycle, queue
from scheduling.tasks import queue_pass_task
from tests.scheduling.conftest import give_quota

pytestmark = pytest.mark.django_db
S = Reservation.Status


def post(client, pool, **body):
    return client.post("/api/reservations/", {"pool": pool.pk, **body}, format="json")


def parse(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.fixture
def two_tenants(pool, tenant_a, tenant_b, admin_a, admin_b, client_for):
    # B only borrows: its requests cannot reclaim A's capacity, they wait for it
    give_quota(tenant_a, pool, 128)
    give_quota(tenant_b, pool, 0, borrow=128)
    return client_for(admin_a), client_for(admin_b)


def test_asap_queues_with_estimate_and_position_then_the_task_places_it_on_release(pool, two_tenants):
    a, b = two_tenants
    full = post(a, pool, gpus=128, duration_minutes=120)
    assert full.status_code == 201, full.content
    blocker_end = parse(full.json()["end"])
    # a request for now that does not fit is still refused
    assert post(b, pool, gpus=32, duration_minutes=60).status_code == 409
    first = post(b, pool, gpus=32, start="asap", duration_minutes=60)
    second = post(b, pool, gpus=16, start="asap", duration_minutes=30)
    assert first.status_code == 202 and second.status_code == 202, first.content
    one, two = first.json(), second.json()
    assert one["status"] == two["status"] == "queued"
    assert (one["queue_position"], two["queue_position"]) == (1, 2)
    # the earliest time the gang fits: when the blocking reservation ends
    assert parse(one["estimated_start"]) == blocker_end
    assert parse(two["estimated_start"]) == blocker_end
    assert not ReservationAllocation.objects.filter(reservation_id__in=[one["id"], two["id"]]).exists()
    # when the blocker is released and the Celery task runs
    assert a.post(f"/api/reservations/{full.json()['id']}/release/").status_code == 200
    assert queue_pass_task.apply(kwargs={"pool_id": pool.pk}).get() == {"placed": 2, "queued": 0}
    # then both are placed in order, through the normal provisioning path (P_Key, allocations)
    for body, gpus in ((one, 32), (two, 16)):
        placed = b.get(f"/api/reservations/{body['id']}/").json()
        assert placed["status"] == "provisioning" and placed["gpus"] == gpus
        assert placed["pkey"] is not None and placed["queue_position"] is None
        assert placed["explanation"]["queue"]["position"] in (1, 2)
        assert ReservationAllocation.objects.filter(reservation_id=body["id"]).count() == gpus
    assert AuditEntry.objects.filter(action="reservation.place").count() == 2
    assert AuditEntry.objects.filter(action="reservation.queue").count() == 2


def test_asap_that_fits_now_is_placed_at_once(pool, two_tenants):
    _, b = two_tenants
    response = post(b, pool, gpus=16, start="asap", duration_minutes=60)
    assert response.status_code == 201
    assert response.json()["status"] == "provisioning"


def test_cancel_while_queued_is_audited_and_moves_the_queue(pool, two_tenants):
    a, b = two_tenants
    assert post(a, pool, gpus=128, duration_minutes=120).status_code == 201
    first = post(b, pool, gpus=32, start="asap", duration_minutes=60).json()
    second = post(b, pool, gpus=32, start="asap", duration_minutes=60).json()
    response = b.post(f"/api/reservations/{first['id']}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    entry = AuditEntry.objects.get(action="reservation.cancel", object_id=str(first["id"]))
    assert entry.before["status"] == "queued" and entry.after["status"] == "cancelled"
    queue.queue_pass(pool.pk)
    assert b.get(f"/api/reservations/{second['id']}/").json()["queue_position"] == 1
    # a cancelled request is never placed, and cannot be cancelled twice
    assert b.post(f"/api/reservations/{first['id']}/cancel/").status_code == 409
    # another tenant cannot see or cancel it
    assert a.post(f"/api/reservations/{second['id']}/cancel/").status_code == 404


def test_a_request_cancelled_while_queued_is_not_placed_when_capacity_frees(pool, two_tenants):
    a, b = two_tenants
    full = post(a, pool, gpus=128, duration_minutes=120).json()
    cancelled = post(b, pool, gpus=64, start="asap", duration_minutes=60).json()
    kept = post(b, pool, gpus=64, start="asap", duration_minutes=60).json()
    assert b.post(f"/api/reservations/{cancelled['id']}/cancel/").status_code == 200
    # when the pool frees, room for both: only the one still queued is placed
    assert a.post(f"/api/reservations/{full['id']}/release/").status_code == 200
    assert queue_pass_task.apply(kwargs={"pool_id": pool.pk}).get() == {"placed": 1, "queued": 0}
    gone = b.get(f"/api/reservations/{cancelled['id']}/").json()
    assert (gone["status"], gone["pkey"], gone["queue_position"]) == ("cancelled", None, None)
    assert not ReservationAllocation.objects.filter(reservation_id=cancelled["id"]).exists()
    assert b.get(f"/api/reservations/{kept['id']}/").json()["status"] == "provisioning"
    assert not AuditEntry.objects.filter(action="reservation.place", object_id=str(cancelled["id"])).exists()


def test_queued_gpus_are_apart_from_use_and_rechecked_at_placement(pool, tenant_a, tenant_b, two_tenants):
    a, b = two_tenants
    give_quota(tenant_b, pool, 0, borrow=64)  # B's limit: 64 GPUs
    hold = post(a, pool, gpus=96, duration_minutes=120).json()
    mine = post(b, pool, gpus=32, duration_minutes=240).json()
    assert mine["status"] == "provisioning"
    queued = post(b, pool, gpus=32, start="asap", duration_minutes=60)
    assert queued.status_code == 202, queued.content
    usage = b.get("/api/quotas/").json()["results"][0]["usage"]
    assert usage["used_gpus"] == 32 and usage["queued_gpus"] == 32 and usage["headroom_gpus"] == 32
    # larger than the quota's limit: it could never be placed, refused at submit
    never = post(b, pool, gpus=72, start="asap", duration_minutes=60)
    assert never.status_code == 409
    assert never.json()["code"] == "over_quota_limit" and "can never fit the quota of 64" in never.json()["detail"]
    # within the limit only once B's own reservation ends: capacity alone does not place it
    third = post(b, pool, gpus=32, start="asap", duration_minutes=60).json()
    assert third["status"] == "queued"
    a.post(f"/api/reservations/{hold['id']}/release/")
    queue.queue_pass(pool.pk)
    statuses = {r.pk: r.status for r in Reservation.objects.filter(pk__in=[queued.json()["id"], third["id"]])}
    assert statuses == {queued.json()["id"]: S.PROVISIONING, third["id"]: S.QUEUED}
    assert sum(r.gpus for r in Reservation.objects.live().filter(tenant=tenant_b)) == 64


def test_patience_waits_for_one_leaf_group_then_takes_a_wider_placement(pool, two_tenants):
    a, b = two_tenants
    # two nodes of every leaf group are out of service: 8 free nodes, no 3 of them under one leaf
    for node in Node.objects.filter(pools=pool).order_by("name"):
        if int(node.name[-2:]) % 4 in (1, 2):
            node.state = Node.State.DOWN
            node.save()
    response = post(b, pool, gpus=24, start="asap", duration_minutes=60, max_wait_minutes=30)
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["max_wait_minutes"] == 30 and "packed placement (one leaf group)" in body["explanation"]["patience"]
    # before max_wait: still waiting, though a wider placement would fit
    queue.queue_pass(pool.pk, now=timezone.now() + dt.timedelta(minutes=20))
    assert Reservation.objects.get(pk=body["id"]).status == S.QUEUED
    # after max_wait: the wider placement is taken, and the explanation says why
    queue.queue_pass(pool.pk, now=timezone.now() + dt.timedelta(minutes=31))
    placed = b.get(f"/api/reservations/{body['id']}/").json()
    assert placed["status"] == "provisioning"
    assert len(placed["placement"]["leaf_groups"]) == 2
    assert placed["explanation"]["queue"]["packed"] is False
    assert "max_wait of 30 min elapsed" in placed["explanation"]["queue"]["patience"]


def test_patience_takes_the_packed_placement_when_it_frees_in_time(pool, two_tenants):
    a, b = two_tenants
    full = post(a, pool, gpus=128, duration_minutes=120).json()
    body = post(b, pool, gpus=24, start="asap", duration_minutes=60, max_wait_minutes=30).json()
    assert body["status"] == "queued"
    a.post(f"/api/reservations/{full['id']}/release/")
    queue.queue_pass(pool.pk, now=timezone.now() + dt.timedelta(minutes=5))
    placed = b.get(f"/api/reservations/{body['id']}/").json()
    assert placed["status"] == "provisioning" and len(placed["placement"]["leaf_groups"]) == 1
    assert placed["explanation"]["queue"]["packed"] is True


def test_pool_default_max_wait_is_set_by_operators_and_applies(pool, operator, client_for, two_tenants):
    _, b = two_tenants
    ops = client_for(operator)
    response = ops.patch(f"/api/pools/{pool.pk}/", {"default_max_wait_minutes": 45}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["default_max_wait_minutes"] == 45
    assert b.patch(f"/api/pools/{pool.pk}/", {"default_max_wait_minutes": 5}, format="json").status_code == 403
    assert ops.patch(f"/api/pools/{pool.pk}/", {"name": "renamed"}, format="json").status_code == 400
    post(two_tenants[0], pool, gpus=128, duration_minutes=60)
    queued = post(b, pool, gpus=24, start="asap", duration_minutes=60).json()
    assert queued["max_wait_minutes"] == 45
    assert AuditEntry.objects.filter(action="pool.patience").exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"gpus": 8, "start": "asap", "end": "2030-01-01T00:00:00Z"}, "start"),
        ({"gpus": 8, "duration_minutes": 60, "max_wait_minutes": 10}, "max_wait_minutes"),
        ({"gpus": 8, "start": "soon", "duration_minutes": 60}, "start"),
    ],
)
def test_asap_input_errors_name_the_field(pool, two_tenants, body, field):
    response = post(two_tenants[1], pool, **body)
    assert response.status_code == 400 and field in response.json()["fields"]


def published_tasks() -> list[tuple[str, dict]]:
    """Drain the broker's default queue (the real one of this run): (task name, kwargs)."""
    from console.celery import app

    found = []
    with app.connection_for_read() as conn:
        inbox = conn.SimpleQueue(app.conf.task_default_queue)
        while True:
            try:
                message = inbox.get(block=False)
            except inbox.Empty:
                break
            found.append((message.headers["task"], message.payload[1]))
            message.ack()
        inbox.close()
    return found


def test_a_node_back_in_service_publishes_a_queue_pass_after_commit(pool, operator):
    from django.test import TestCase

    from console.tenancy.context import Actor
    from console.tenancy.models import Principal
    from scheduling.services import inventory

    node = Node.objects.filter(pools=pool).first()
    actor, principal = Actor.for_user(operator), Principal.of(operator)
    inventory.set_node_state(actor, principal, node, Node.State.DOWN)
    published_tasks()
    with TestCase.captureOnCommitCallbacks(execute=True):
        inventory.set_node_state(actor, principal, node, Node.State.AVAILABLE)
        assert published_tasks() == []  # nothing before commit
    assert ("scheduling.queue_pass", {"pool_id": pool.pk}) in published_tasks()


def test_a_queued_request_for_one_leaf_group_is_not_placed_across_two(pool, two_tenants):
    a, b = two_tenants
    # given A holding every node of the pool, one node per reservation
    held = [post(a, pool, nodes=1, duration_minutes=120) for _ in range(16)]
    assert all(r.status_code == 201 for r in held), held[0].content
    leaf_of = {n.pk: n.hcas.order_by("index").first().leaf for n in Node.objects.filter(pools=pool)}
    node_of = {
        r.json()["id"]: ReservationAllocation.objects.filter(reservation_id=r.json()["id"]).first().node_id
        for r in held
    }
    # and B queueing two nodes that must share a leaf switch (max_switch_hops=0)
    queued = post(b, pool, nodes=2, start="asap", duration_minutes=30, max_switch_hops=0)
    assert queued.status_code == 202, queued.content
    # when A releases two nodes under two different leaf switches
    by_leaf: dict[str, int] = {}
    for res_id, node_id in node_of.items():
        by_leaf.setdefault(leaf_of[node_id], res_id)
    first, second = list(by_leaf.values())[:2]
    for res_id in (first, second):
        assert a.post(f"/api/reservations/{res_id}/release/").status_code == 200
    queue_pass_task.apply(kwargs={"pool_id": pool.pk}).get()
    # then B's request still waits: two free nodes, but not under one leaf
    assert Reservation.objects.get(pk=queued.json()["id"]).status == S.QUEUED
    # when a second node under the first leaf frees, it is placed there
    leaf = leaf_of[node_of[first]]
    mate = next(r for r, n in node_of.items() if leaf_of[n] == leaf and r != first)
    assert a.post(f"/api/reservations/{mate}/release/").status_code == 200
    queue_pass_task.apply(kwargs={"pool_id": pool.pk}).get()
    placed = Reservation.objects.get(pk=queued.json()["id"])
    assert placed.status != S.QUEUED, placed.reason
    nodes = set(ReservationAllocation.objects.filter(reservation=placed).values_list("node_id", flat=True))
    assert {leaf_of[n] for n in nodes} == {leaf} and len(nodes) == 2


def test_a_pass_that_moves_nothing_writes_nothing(pool, two_tenants):
    """The pass compares each estimate with the stored one to the microsecond: a steady pass
    updates no row, and one that moves estimates writes them as the database reads them back."""
    a, b = two_tenants
    full = post(a, pool, gpus=96, duration_minutes=120).json()
    ids = [post(b, pool, gpus=64, start="asap", duration_minutes=m).json()["id"] for m in (60, 45, 30)]
    assert queue.queue_pass(pool.pk) == {"placed": 0, "queued": 3}
    with CaptureQueriesContext(connection) as steady:
        assert queue.queue_pass(pool.pk) == {"placed": 0, "queued": 3}
    assert not _reservation_updates(steady)
    # the blocker's window ends 17 min 0.123457 s earlier: the head's estimate moves, to the microsecond
    before = Reservation.objects.get(pk=ids[0]).explanation
    assert before["queue"] and before["patience"]
    blocker = Reservation.objects.get(pk=full["id"])
    earlier = blocker.end - dt.timedelta(minutes=17, microseconds=123457)
    with transaction.atomic():
        lifecycle.truncate_allocations(blocker, earlier)
        blocker.save()
    with CaptureQueriesContext(connection) as moving:
        assert queue.queue_pass(pool.pk) == {"placed": 0, "queued": 3}
    assert _reservation_updates(moving)
    head = Reservation.objects.get(pk=ids[0])
    assert head.estimated_start == earlier and head.queue_position == 1
    assert head.explanation == before  # the note set in place, the rest of the explanation kept
    with CaptureQueriesContext(connection) as again:
        queue.queue_pass(pool.pk)
    assert not _reservation_updates(again)


def _reservation_updates(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if q["sql"].startswith('UPDATE "scheduling_reservation"')]


def test_a_queued_request_says_why_it_waits_and_the_words_follow_the_queue(pool, tenant_b, two_tenants):
    a, b = two_tenants
    full = post(a, pool, gpus=128, duration_minutes=120).json()
    end = parse(full["end"]).strftime("%Y-%m-%d %H:%M UTC")
    first = post(b, pool, gpus=32, start="asap", duration_minutes=60).json()
    second = post(b, pool, gpus=16, start="asap", duration_minutes=30).json()
    # in words, in the API, from the moment it is queued: no room until the blocker ends
    assert first["reason"] == f"no room for 32 GPUs now: expected to start about {end} (first in the queue)"
    assert b.get(f"/api/reservations/{second['id']}/").json()["reason"] == (
        f"no room for 16 GPUs now: expected to start about {end} (1 request ahead of it)"
    )
    # when the first leaves the queue, the second's words say it is first now
    assert b.post(f"/api/reservations/{first['id']}/cancel/").status_code == 200
    queue.queue_pass(pool.pk)
    assert b.get(f"/api/reservations/{second['id']}/").json()["reason"].endswith("(first in the queue)")
    # once placed, it waits no more: no reason left
    a.post(f"/api/reservations/{full['id']}/release/")
    queue.queue_pass(pool.pk)
    placed = b.get(f"/api/reservations/{second['id']}/").json()
    assert placed["status"] == "provisioning" and placed["reason"] == ""
    # over quota: B may borrow 24 and holds those 16: another 16 waits for them, not for room
    give_quota(tenant_b, pool, 0, borrow=24)
    over = post(b, pool, gpus=16, start="asap", duration_minutes=30).json()
    assert over["status"] == "queued"
    assert over["reason"].startswith("over your quota in this pool now: the 16 GPUs wait until your other")
