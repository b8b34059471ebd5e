"""Reservations through the services: placement, quota, explanations, P_Keys, lifecycle, the
fabric's hooks as scheduling registers with them, and the periodic tick. The fabric is the 16-node fat tree of conftest."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.fabric import enqueue, hooks
from console.tenancy.errors import Conflict, Invalid
from console.tenancy.models import AuditEntry
from scheduling.models import Reservation, ReservationAllocation, ReservationSubnet
from scheduling.services import lifecycle, reservations
from tests.scheduling.conftest import (
    SYSTEM,
    at,
    give_quota,
    make_pool,
    request_for,
    tenant_principal,
)

S = Reservation.Status
pytestmark = pytest.mark.django_db


def reserve(tenant, pool, **kw) -> Reservation:
    return reservations.reserve(SYSTEM, tenant_principal(tenant), request_for(pool, **kw))


def verify(fabric_id: int, *reservations_: Reservation, change_id: int = 1) -> None:
    hooks.notify_verified(fabric_id, present_pkeys={r.pkey for r in reservations_}, change_id=change_id)


@pytest.mark.smoke
def test_reserve_packs_a_gang_under_one_leaf_and_records_everything(pool, tenant_a):
    # given a quota of 64 GPUs
    give_quota(tenant_a, pool, 64)
    # when tenant A asks for 32 GPUs now
    reservation = reserve(tenant_a, pool, gpus=32)
    # then 4 whole nodes under one leaf are provisioning, with a P_Key and one row per GPU
    assert reservation.status == S.PROVISIONING
    assert reservation.gpus == 32
    assert reservation.placement["leaf_groups"] == ["leaf-01"]
    assert reservation.placement["spines"] == []
    assert pool.fabric.pkey_min <= reservation.pkey <= pool.fabric.pkey_max
    assert ReservationAllocation.objects.filter(reservation=reservation).count() == 32
    assert AuditEntry.objects.filter(action="reservation.create").count() == 1


@pytest.mark.smoke
def test_preview_reserves_nothing_and_matches_reserve(pool, tenant_a):
    give_quota(tenant_a, pool, 64)
    body = reservations.preview(tenant_principal(tenant_a), request_for(pool, nodes=2))
    assert body["placeable"] and body["placement"]["nodes"] == ["node-001", "node-002"]
    assert not Reservation.objects.exists()
    assert reserve(tenant_a, pool, nodes=2).placement["nodes"] == body["placement"]["nodes"]


def test_over_quota_is_rejected_with_the_numbers(pool, tenant_a):
    give_quota(tenant_a, pool, 32, 16)
    reserve(tenant_a, pool, gpus=32)
    refused = reserve(tenant_a, pool, gpus=24)
    assert refused.status == S.REJECTED
    assert refused.explanation["reason"] == "over_quota"
    assert "24 GPUs requested" in refused.reason and "limit of 48" in refused.reason
    assert "headroom 16 GPUs" in refused.reason
    assert not refused.allocations.exists() and refused.pkey is None


def test_no_quota_is_rejected(pool, tenant_b):
    refused = reserve(tenant_b, pool, gpus=8)
    assert refused.status == S.REJECTED and "no quota" in refused.reason


def test_rejection_explains_itself_with_the_earliest_window(pool, tenant_a, tenant_b):
    give_quota(tenant_a, pool, 96)
    give_quota(tenant_b, pool, 32)
    # given 3 nodes of every leaf busy for 4 hours
    for _leaf in range(4):
        busy = reserve(tenant_a, pool, nodes=3, same_leaf=True, duration=dt.timedelta(hours=4))
        assert busy.status == S.PROVISIONING
    # when tenant B wants 4 nodes under one leaf for an hour
    refused = reserve(tenant_b, pool, nodes=4, same_leaf=True, duration=dt.timedelta(hours=1))
    # then the refusal says how big the largest free group is and when 4 fit
    assert refused.status == S.REJECTED
    assert refused.explanation["reason"] == "same_leaf"
    assert "4 nodes under one leaf requested; the largest free leaf group has 1" in refused.reason
    assert "earliest window with 4" in refused.reason
    assert refused.explanation["details"]["earliest_start"] is not None


def test_future_window_backfills_behind_a_busy_slot(pool, tenant_a):
    give_quota(tenant_a, pool, 128)
    reserve(tenant_a, pool, gpus=128, duration=dt.timedelta(hours=2))
    later = reserve(tenant_a, pool, gpus=128, start=at(2), end=at(4))
    assert later.status == S.PLACED
    overlapping = reserve(tenant_a, pool, gpus=8, start=at(1), end=at(3))
    assert overlapping.status == S.REJECTED


def test_sub_node_shares_share_a_node_without_overlap(pool, tenant_a):
    give_quota(tenant_a, pool, 64)
    a = reserve(tenant_a, pool, gpus=4)
    b = reserve(tenant_a, pool, gpus=4)
    assert a.placement["nodes"] == b.placement["nodes"]
    assert set(a.placement["gpu_indices"][0]).isdisjoint(b.placement["gpu_indices"][0])


def test_pkeys_are_unique_while_live_and_reused_only_after_verified_gone(pool, tenant_a):
    give_quota(tenant_a, pool, 128)
    first = reserve(tenant_a, pool, gpus=8)
    second = reserve(tenant_a, pool, gpus=8)
    assert first.pkey != second.pkey
    lifecycle.release(SYSTEM, tenant_principal(tenant_a), first)
    # still ending: the P_Key may be on the wire, nobody gets it
    third = reserve(tenant_a, pool, gpus=8)
    assert third.pkey not in {first.pkey, second.pkey}
    verify(pool.fabric_id, second, third)
    first.refresh_from_db()
    assert first.status == S.RELEASED and not first.pkey_live
    assert reserve(tenant_a, pool, gpus=8).pkey == first.pkey


def test_pkey_uniqueness_is_a_database_constraint(pool, tenant_a):
    from django.db import IntegrityError, transaction

    give_quota(tenant_a, pool, 64)
    first = reserve(tenant_a, pool, gpus=8)
    second = reserve(tenant_a, pool, gpus=8)
    with pytest.raises(IntegrityError), transaction.atomic():  # subnet_pkey_live_unique
        ReservationSubnet.objects.filter(reservation=second).update(pkey=first.pkey)


def test_reservation_is_ready_only_after_the_fabric_verified_its_pkey(pool, tenant_a):
    give_quota(tenant_a, pool, 64)
    reservation = reserve(tenant_a, pool, gpus=16)
    # the desired partitions carry exactly its nodes' HCA port GUIDs, full members, its SL
    (partition,) = hooks.requested_partitions(pool.fabric_id)
    assert partition["pkey"] == reservation.pkey and partition["sl"] == 1
    assert partition["name"] == f"res-{reservation.pk}"
    assert len(partition["members"]) == 2 * 8 and {m[1] for m in partition["members"]} == {"full"}
    # a change that verified other keys does not make it ready
    hooks.notify_verified(pool.fabric_id, present_pkeys={0x7FF0}, change_id=1)
    reservation.refresh_from_db()
    assert reservation.status == S.PROVISIONING
    hooks.notify_failed(pool.fabric_id, change_id=2, error="lint: bad GUID")
    reservation.refresh_from_db()
    assert "lint: bad GUID" in reservation.fabric_error and reservation.status == S.PROVISIONING
    verify(pool.fabric_id, reservation, change_id=3)
    reservation.refresh_from_db()
    assert reservation.status == S.READY and reservation.ready_at and not reservation.fabric_error


def test_release_removes_the_partition_then_releases_when_verified_gone(pool, tenant_a):
    give_quota(tenant_a, pool, 64)
    reservation = reserve(tenant_a, pool, gpus=16)
    verify(pool.fabric_id, reservation)
    lifecycle.release(SYSTEM, tenant_principal(tenant_a), reservation)
    reservation.refresh_from_db()
    assert reservation.status == S.ENDING
    assert hooks.requested_partitions(pool.fabric_id) == []
    # GPUs are free at once
    assert reserve(tenant_a, pool, gpus=64).status == S.PROVISIONING
    verify(pool.fabric_id, reservation)  # still present: stays ending
    reservation.refresh_from_db()
    assert reservation.status == S.ENDING
    hooks.notify_verified(pool.fabric_id, present_pkeys=set(), change_id=9)
    reservation.refresh_from_db()
    assert reservation.status == S.RELEASED


def test_illegal_transitions_are_409(pool, tenant_a):
    give_quota(tenant_a, pool, 64)
    reservation = reserve(tenant_a, pool, gpus=8)
    verify(pool.fabric_id, reservation)
    with pytest.raises(Conflict):
        lifecycle.cancel(SYSTEM, tenant_principal(tenant_a), reservation)  # ready: release it
    lifecycle.release(SYSTEM, tenant_principal(tenant_a), reservation)
    with pytest.raises(Conflict):
        lifecycle.release(SYSTEM, tenant_principal(tenant_a), reservation)


def test_extend_checks_bookings_and_quota(pool, tenant_a, tenant_b):
    give_quota(tenant_a, pool, 64, borrow=64)
    give_quota(tenant_b, pool, 64, borrow=64)
    mine = reserve(tenant_a, pool, nodes=16, duration=dt.timedelta(hours=1))
    theirs = reserve(tenant_b, pool, nodes=1, start=mine.end + dt.timedelta(hours=1), duration=dt.timedelta(hours=1))
    assert theirs.status == S.PLACED
    extended = lifecycle.extend(SYSTEM, tenant_principal(tenant_a), mine, mine.end + dt.timedelta(minutes=30))
    assert extended.end == mine.end + dt.timedelta(minutes=30)
    assert {a.end for a in extended.allocations.all()} == {extended.end}
    with pytest.raises(Conflict, match="reserved from"):
        lifecycle.extend(SYSTEM, tenant_principal(tenant_a), mine, mine.end + dt.timedelta(hours=3))
    with pytest.raises(Invalid):
        lifecycle.extend(SYSTEM, tenant_principal(tenant_a), mine, mine.start)


def test_expiry_tick_starts_and_ends_windows(pool, tenant_a, monkeypatch):
    published = []
    monkeypatch.setattr(enqueue, "publish_reconcile", published.append)
    give_quota(tenant_a, pool, 64)
    future = reserve(tenant_a, pool, gpus=8, start=at(1), end=at(2))
    now_one = reserve(tenant_a, pool, gpus=8, duration=dt.timedelta(minutes=30))
    assert future.status == S.PLACED
    counts = lifecycle.tick(timezone.now() + dt.timedelta(hours=1, minutes=5))
    future.refresh_from_db()
    now_one.refresh_from_db()
    assert future.status == S.PROVISIONING and now_one.status == S.ENDING
    assert counts["started"] == 1 and counts["expired"] == 1
    assert lifecycle.tick(timezone.now() + dt.timedelta(hours=1, minutes=5))["expired"] == 0


def test_tick_resends_a_lost_reconcile_within_seconds_unless_a_change_is_under_way(pool, tenant_a, monkeypatch):
    from console.fabric.models import ChangeRequest

    published = []
    monkeypatch.setattr(enqueue, "publish_reconcile", published.append)
    give_quota(tenant_a, pool, 64)
    # given a provisioning reservation whose reconcile message was lost (nothing published here:
    # the test's transaction never commits), with no change of its fabric under way
    reservation = reserve(tenant_a, pool, gpus=8)
    assert reservation.status == S.PROVISIONING
    soon = timezone.now() + dt.timedelta(seconds=15)
    # then the tick 15 s later re-sends it (a web process killed between commit and publish)
    assert lifecycle.tick(soon)["reconciles"] == 1
    # but not while a change of the fabric is open: the push under way will make it ready
    change = ChangeRequest.objects.create(fabric_id=pool.fabric_id, status=ChangeRequest.Status.APPLYING)
    assert lifecycle.tick(soon)["reconciles"] == 0
    # nor, within two minutes, after its push failed (no retry storm on a broken fabric)
    change.status = ChangeRequest.Status.FAILED
    change.save()
    Reservation.objects.filter(pk=reservation.pk).update(fabric_error="fabric change 1 failed: lint")
    assert lifecycle.tick(soon)["reconciles"] == 0
    assert lifecycle.tick(timezone.now() + dt.timedelta(minutes=3))["reconciles"] == 1


def test_reconcile_is_enqueued_by_name_only_after_commit(pool, tenant_a, monkeypatch):
    from console.celery import app as celery_app
    from console.fabric.enqueue import RECONCILE_EXPIRES_S

    sent = []
    monkeypatch.setattr(celery_app, "send_task", lambda name, **kw: sent.append((name, kw)))
    give_quota(tenant_a, pool, 64)
    from django.test import TestCase

    with TestCase.captureOnCommitCallbacks(execute=True) as callbacks:
        reserve(tenant_a, pool, gpus=8)
        assert sent == []  # nothing published inside the transaction
    assert len(callbacks) == 1
    # a reconcile expires unconsumed (a dead site's queue must not fill with them; the tick sends anew)
    assert sent == [("fabric.reconcile", {"kwargs": {"fabric_id": pool.fabric_id}, "expires": RECONCILE_EXPIRES_S})]


def test_guaranteed_request_reclaims_borrowed_capacity_with_notice(pool, tenant_a, tenant_b):
    give_quota(tenant_a, pool, 64, borrow=64)
    give_quota(tenant_b, pool, 64)
    # tenant A holds its guarantee and borrows 64 more: the whole pool
    reserve(tenant_a, pool, gpus=64)
    borrowed = reserve(tenant_a, pool, gpus=64)
    assert borrowed.borrowed
    # tenant B claims its guarantee
    claim = reserve(tenant_b, pool, gpus=32)
    assert claim.status == S.PROVISIONING
    borrowed.refresh_from_db()
    assert borrowed.status == S.PREEMPTED
    assert "borrowed capacity reclaimed" in borrowed.reason
    assert "Tenant B" not in borrowed.reason  # tenants do not learn of each other


def test_draining_nodes_and_failed_gpus_receive_nothing(pool, tenant_a):
    from scheduling.models import GPU, Node
    from scheduling.services import inventory
    from tests.scheduling.conftest import OPERATOR

    give_quota(tenant_a, pool, 128)
    inventory.set_node_state(SYSTEM, OPERATOR, Node.objects.get(name="node-001"), "draining")
    GPU.objects.filter(node__name="node-002", index=3).update(health="failed")
    placed = reserve(tenant_a, pool, gpus=8)
    assert placed.placement["nodes"][0] not in {"node-001", "node-002"}


def test_bad_requests_are_400(pool, tenant_a):
    give_quota(tenant_a, pool, 64)
    p = tenant_principal(tenant_a)
    for kw in (
        {"gpus": -8},
        {"gpus": 0},
        {"nodes": 0},
        {"gpus": 8, "start": at(-1)},
        {"gpus": 8, "start": at(2), "end": at(1)},
        {"gpus": 8, "duration": dt.timedelta(days=400)},
        {"gpus": 8, "priority_class": "urgent"},
    ):
        with pytest.raises(Invalid):
            reservations.reserve(SYSTEM, p, request_for(pool, **kw))
    assert not Reservation.objects.exists()


def test_pools_of_one_fabric_never_double_book_shared_nodes(pool, tenant_a):
    other = make_pool(pool.fabric, "first-leaf", nodes=list(pool.nodes.order_by("name")[:4]))
    give_quota(tenant_a, pool, 128)
    give_quota(tenant_a, other, 32)
    reserve(tenant_a, other, nodes=4)
    big = reserve(tenant_a, pool, nodes=16)
    assert big.status == S.REJECTED


def test_a_reservation_takes_its_class_sl_from_the_fabrics_qos_table(pool, tenant_a):
    from console.fabric.models import FabricQos
    from scheduling.models import ServiceLevels

    # given a fabric whose ServiceLevels row says training → SL 1, and whose saved QoS table (the
    # one pushed to OpenSM) says training → SL 5 (on VL 3)
    give_quota(tenant_a, pool, 64)
    ServiceLevels.objects.update_or_create(
        fabric=pool.fabric, defaults={"training": 1, "inference": 2, "best_effort": 0}
    )
    table = {
        "max_vls": 8,
        "high_limit": 4,
        "classes": {
            "training": {"sl": 5, "vl": 3, "table": "low", "weight": 192},
            "inference": {"sl": 6, "vl": 2, "table": "high", "weight": 64},
            "best-effort": {"sl": 4, "vl": 0, "table": "low", "weight": 64},
        },
    }
    FabricQos.objects.create(fabric=pool.fabric, table=table)
    # when reservations of each class are granted
    training = reserve(tenant_a, pool, gpus=8)
    inference = reserve(tenant_a, pool, gpus=8, priority_class="inference")
    best_effort = reserve(tenant_a, pool, gpus=8, priority_class="best-effort")
    # then each takes its class's SL in the table, not the ServiceLevels row's
    assert (training.sl, inference.sl, best_effort.sl) == (5, 6, 4)
    partitions = {p["pkey"]: p["sl"] for p in hooks.requested_partitions(pool.fabric_id)}
    assert partitions[training.pkey] == 5 and partitions[inference.pkey] == 6


def test_without_a_saved_qos_table_a_reservation_takes_the_default_tables_sl(pool, tenant_a):
    from scheduling.models import ServiceLevels

    # given no saved QoS table (a push renders the default one: training SL 1 → VL 1, inference
    # SL 2 → VL 2, best-effort SL 0 → VL 0) and a ServiceLevels row saying otherwise
    give_quota(tenant_a, pool, 64)
    ServiceLevels.objects.update_or_create(
        fabric=pool.fabric, defaults={"training": 7, "inference": 8, "best_effort": 9}
    )
    # then the SLs are the ones the pushed SL2VL maps to the classes' VLs
    sls = [reserve(tenant_a, pool, gpus=8, priority_class=c).sl for c in ("training", "inference", "best-effort")]
    assert sls == [1, 2, 0]
