"""The preview of a refused request offers what fits (a smaller size now, the full size later,
or the queue); every preview says what it costs; a request without a name gets a readable one.

The pool is the 16-node fat tree of tests/scheduling/conftest.py: 128 GPUs, 8 per node.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest

from scheduling.models import GpuHourPrice, Reservation
from scheduling.services.reservations import preview, reserve
from tests.scheduling.conftest import SYSTEM, give_quota, request_for, tenant_principal

pytestmark = pytest.mark.django_db


def next_minute(at: dt.datetime) -> dt.datetime:
    """Offered starts are whole minutes (what a person types), rounded up."""
    return at.replace(second=0, microsecond=0) + dt.timedelta(minutes=1 if (at.second or at.microsecond) else 0)


def by_kind(body: dict) -> dict[str, dict]:
    return {offer["kind"]: offer for offer in body["offers"]}


def test_over_quota_offers_the_headroom_now_the_full_size_when_own_booking_ends_and_the_queue(pool, tenant_a):
    # given tenant A (64 guaranteed, nothing borrowable) holding 16 GPUs for 2 h
    give_quota(tenant_a, pool, 64)
    admin = tenant_principal(tenant_a)
    held = reserve(SYSTEM, admin, request_for(pool, gpus=16, name="held"))
    assert held.status == Reservation.Status.PROVISIONING, held.reason
    # when it previews 56 GPUs for 1 h now (16 + 56 > 64)
    body = preview(admin, request_for(pool, gpus=56, duration=dt.timedelta(hours=1)))
    # then it is refused, with offers: the headroom now, 56 when its own 16 end, and the queue
    assert not body["placeable"] and body["rejection"]["reason"] == "over_quota"
    offers = by_kind(body)
    headroom = 64 - 16
    assert offers["smaller_now"]["gpus"] == headroom and offers["smaller_now"]["label"] == f"{headroom} GPUs now"
    assert offers["later"]["gpus"] == 56 and offers["later"]["start"] == next_minute(held.end)
    assert offers["queue"]["gpus"] == 56 and offers["queue"]["start"] is None
    # and each offer is placeable as offered
    assert preview(admin, request_for(pool, gpus=headroom, duration=dt.timedelta(hours=1)))["placeable"]
    later = request_for(pool, gpus=56, start=next_minute(held.end), duration=dt.timedelta(hours=1))
    assert preview(admin, later)["placeable"]


def test_over_capacity_offers_the_free_gpus_now_and_the_end_of_the_blocking_reservation(pool, tenant_a, tenant_b):
    # given tenant B holding 96 of the pool's 128 GPUs for 2 h
    give_quota(tenant_a, pool, 32, borrow=96)
    give_quota(tenant_b, pool, 96)
    blocking = reserve(SYSTEM, tenant_principal(tenant_b), request_for(pool, gpus=96, name="b-big"))
    assert blocking.status == Reservation.Status.PROVISIONING, blocking.reason
    free_now = 128 - 96
    # when tenant A previews 64 GPUs now
    body = preview(tenant_principal(tenant_a), request_for(pool, gpus=64))
    # then: the free GPUs now, 64 when B's reservation ends, or the queue
    assert not body["placeable"]
    offers = by_kind(body)
    assert offers["smaller_now"]["gpus"] == free_now
    assert offers["later"]["start"] == next_minute(blocking.end)
    assert offers["queue"]["gpus"] == 64


def test_a_request_over_the_quota_limit_is_offered_no_queue_and_no_later(pool, tenant_a):
    give_quota(tenant_a, pool, 32)
    body = preview(tenant_principal(tenant_a), request_for(pool, gpus=40))
    offers = by_kind(body)
    assert offers["smaller_now"]["gpus"] == 32
    assert "queue" not in offers and "later" not in offers


def test_no_quota_no_offers_and_a_placeable_preview_has_none(pool, tenant_a, tenant_b):
    give_quota(tenant_a, pool, 64)
    assert preview(tenant_principal(tenant_b), request_for(pool, gpus=8))["offers"] == []
    body = preview(tenant_principal(tenant_a), request_for(pool, gpus=8))
    assert body["placeable"] and body["offers"] == []


def test_preview_through_the_api_says_the_cost_at_the_pools_price(pool, tenant_a, admin_a, client_for, settings):
    # given a price of 2.50 a GPU-hour for training in this pool
    settings.CONSOLE_CURRENCY = "USD"
    give_quota(tenant_a, pool, 64)
    GpuHourPrice.objects.create(pool=pool, priority_class="training", price=Decimal("2.50"))
    api = client_for(admin_a)
    # when 16 GPUs are previewed for 3 h
    body = api.post(
        "/api/reservations/preview/", {"pool": pool.pk, "gpus": 16, "duration_minutes": 180}, format="json"
    ).json()
    # then 48 GPU-hours at 2.50 = 120.00
    assert body["gpu_hours"] == "48.00"
    assert body["cost"] == str((Decimal(16 * 3) * Decimal("2.50")).quantize(Decimal("0.01")))
    assert body["currency"] == "USD" and body["offers"] == []


def test_refused_preview_through_the_api_lists_offers(pool, tenant_a, admin_a, client_for):
    give_quota(tenant_a, pool, 24)
    api = client_for(admin_a)
    body = api.post(
        "/api/reservations/preview/", {"pool": pool.pk, "gpus": 32, "duration_minutes": 60}, format="json"
    ).json()
    assert body["placeable"] is False
    assert [o["kind"] for o in body["offers"]] == ["smaller_now"]
    assert body["offers"][0] == {
        "kind": "smaller_now",
        "gpus": 24,
        "nodes": None,
        "start": None,
        "label": "24 GPUs now",
    }


def test_a_request_by_nodes_is_offered_nodes_and_taking_an_offer_asks_for_nodes(pool, tenant_a, tenant_b):
    # given tenant B holding 10 of the pool's 16 nodes (80 GPUs) for 2 h
    give_quota(tenant_a, pool, 48, borrow=16)
    give_quota(tenant_b, pool, 80)
    blocking = reserve(SYSTEM, tenant_principal(tenant_b), request_for(pool, nodes=10, name="b-big"))
    assert blocking.status == Reservation.Status.PROVISIONING, blocking.reason
    # when tenant A previews 8 nodes now (only 6 are free)
    admin = tenant_principal(tenant_a)
    body = preview(admin, request_for(pool, nodes=8))
    # then every offer is in nodes: 6 nodes now, 8 nodes when B's reservation ends, or 8 queued
    assert not body["placeable"]
    offers = by_kind(body)
    assert {k: (o["nodes"], o["gpus"]) for k, o in offers.items()} == {
        "smaller_now": (6, 48),
        "later": (8, 64),
        "queue": (8, 64),
    }
    assert offers["smaller_now"]["label"] == "6 nodes (48 GPUs) now"
    assert offers["later"]["label"].startswith("8 nodes (64 GPUs) at ") and offers["later"]["label"].endswith(" UTC")
    assert offers["queue"]["label"] == "Queue 8 nodes (64 GPUs), as soon as possible"
    # and taking the "now" offer as offered (by nodes) reserves 6 whole nodes
    taken = reserve(SYSTEM, admin, request_for(pool, nodes=offers["smaller_now"]["nodes"], name="taken"))
    assert taken.status == Reservation.Status.PROVISIONING, taken.reason
    assert len(taken.placement["nodes"]) == 6


def test_a_reservation_without_a_name_gets_a_readable_one(pool, tenant_a, admin_a, client_for):
    give_quota(tenant_a, pool, 64)
    api = client_for(admin_a)
    response = api.post("/api/reservations/", {"pool": pool.pk, "gpus": 16, "duration_minutes": 60}, format="json")
    assert response.status_code == 201, response.content
    assert re.fullmatch(r"tenant-a-16g-[0-9a-f]{4}", response.json()["name"])
    named = api.post(
        "/api/reservations/", {"pool": pool.pk, "gpus": 8, "duration_minutes": 60, "name": "mine"}, format="json"
    )
    assert named.json()["name"] == "mine"
