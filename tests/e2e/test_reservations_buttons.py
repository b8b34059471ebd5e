"""The buttons of "my reservations" cards in the browser: extend, cancel and release.

No lab: the fabric is a designed 1-SU rail-optimised fabric (32 DGX H100) with its inventory;
reservations are made through scheduling's services, and the push pipeline's verdicts (partition
verified on the ports, partition gone) are given by calling ``lifecycle.fabric_verified`` the way
the pipeline does. The page talks to the real REST API of a live server.

Tenant A (quota 16 GPUs guaranteed, nothing borrowable) holds a running reservation of 8 GPUs
and a future one of 16 GPUs starting when the first ends, so extending the first is over quota
until the second is cancelled.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from console.fabric.models import Fabric
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from designer.services import create_design
from scheduling.models import Node, Pool, Reservation
from scheduling.services import inventory, lifecycle, quotas
from scheduling.services.reservations import ReservationRequest, reserve

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
ACTOR = Actor.system("e2e")
OPERATOR = Principal(None, Role.OPERATOR, None)
S = Reservation.Status


@pytest.fixture
def booked(tenant_a, tenant_b):
    """Tenant A: ``running`` (8 GPUs, ready, 2 h) and ``later`` (16 GPUs, placed, from the end
    of ``running`` for 2 h); tenant B: one ready reservation of its own."""
    uid = uuid.uuid4().hex[:6]
    _, revision = create_design(ACTOR, OPERATOR, name=f"e2e-btn-{uid}", options=ONE_SU)
    fabric = Fabric.objects.create(name=f"e2e-btn-{uid}", revision=revision)
    inventory.import_inventory(fabric)
    pool = inventory.create_pool(
        ACTOR, OPERATOR, fabric=fabric, name="su1", kind=Pool.Kind.BY_SU, nodes=list(Node.objects.filter(fabric=fabric))
    )
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=16)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_b, pool=pool, guaranteed_gpus=64)
    a = Principal(None, Role.TENANT_ADMIN, tenant_a.pk)
    running = reserve(
        ACTOR, a, ReservationRequest(pool_id=pool.pk, gpus=8, name="a-running", duration=dt.timedelta(hours=2))
    )
    later = reserve(
        ACTOR,
        a,
        ReservationRequest(pool_id=pool.pk, gpus=16, name="a-later", start=running.end, duration=dt.timedelta(hours=2)),
    )
    b = Principal(None, Role.TENANT_ADMIN, tenant_b.pk)
    theirs = reserve(
        ACTOR, b, ReservationRequest(pool_id=pool.pk, gpus=8, name="b-train", duration=dt.timedelta(hours=2))
    )
    assert running.status == theirs.status == S.PROVISIONING, running.reason
    assert later.status == S.PLACED, later.reason
    # the push pipeline verified both partitions on their ports
    lifecycle.fabric_verified(fabric.pk, {running.pkey, theirs.pkey}, change_id=0)
    running.refresh_from_db()
    assert running.status == S.READY
    return {"fabric": fabric, "running": running, "later": later, "theirs": theirs}


def utc_minute(at: dt.datetime) -> str:
    """How a card prints a time."""
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def card(page, reservation: Reservation):
    return page.locator(f'[data-testid=reservation][data-id="{reservation.pk}"]')


def api_get(page, base: str, reservation: Reservation) -> dict:
    response = page.request.get(f"{base}/api/reservations/{reservation.pk}/")
    assert response.status == 200, response.text()
    return response.json()


def open_my_reservations(page, base: str, cards: int = 2):
    page.goto(f"{base}/reservations/")
    expect(page.locator("body[data-reservations=ready]")).to_be_attached()
    expect(page.get_by_test_id("reservation")).to_have_count(cards)  # the live ones; nothing of tenant B


def test_tenant_extends_cancels_and_releases_from_the_cards(page, live_server, login, admin_a, booked):
    base = live_server.url
    running, later = booked["running"], booked["later"]
    login("admin-a")
    open_my_reservations(page, base)
    quota = page.get_by_test_id("quota-row").filter(has_text="su1")
    expect(quota.get_by_test_id("quota-used")).to_have_text("8")
    mine = card(page, running)
    expect(mine.get_by_test_id("res-status")).to_have_text("ready")
    expect(mine.get_by_test_id("res-window")).to_contain_text(f"→ {utc_minute(running.end)}")
    expect(card(page, later).get_by_test_id("res-status")).to_have_text("placed")
    expect(page.get_by_test_id("reservation").filter(has_text="b-train")).to_have_count(0)

    # extending the running one by an hour would overlap the future 16 GPUs: over quota, and
    # the card says so and keeps its window
    mine.get_by_test_id("res-extend-hours").fill("1")
    mine.get_by_test_id("res-extend").click()
    error = mine.get_by_test_id("res-action-error")
    expect(error).to_contain_text("over quota")
    expect(error).to_contain_text("limit of 16")
    expect(mine.get_by_test_id("res-window")).to_contain_text(f"→ {utc_minute(running.end)}")
    assert _at(api_get(page, base, running)["end"]) == running.end

    # cancelling the future reservation: the card turns cancelled, without buttons
    later_card = card(page, later)
    expect(later_card.get_by_test_id("res-cancel")).to_be_visible()
    # it asks first, saying what it does and that it cannot be undone; "Keep it" leaves it placed
    later_card.get_by_test_id("res-cancel").click()
    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading")).to_have_text("Cancel a-later?")
    expect(dialog.get_by_test_id("confirm-text")).to_contain_text("16 GPUs is withdrawn")
    expect(dialog.get_by_test_id("confirm-undo")).to_contain_text("cannot come back")
    dialog.get_by_test_id("confirm-keep").click()
    expect(dialog).to_have_count(0)
    expect(later_card).to_have_attribute("data-status", "placed")
    assert api_get(page, base, later)["status"] == "placed"
    later_card.get_by_test_id("res-cancel").click()
    page.get_by_test_id("confirm-act").click()
    expect(later_card).to_have_attribute("data-status", "cancelled")
    expect(later_card.get_by_test_id("res-status")).to_have_text("cancelled")
    expect(later_card.locator("button")).to_have_count(0)
    body = api_get(page, base, later)
    assert body["status"] == "cancelled" and body["ended_at"]
    later.refresh_from_db()
    assert later.status == S.CANCELLED and not later.allocations.exists()

    # now the same extension (one and a half hours) fits: the card's end moves, the error goes
    mine.get_by_test_id("res-extend-hours").fill("1.5")
    mine.get_by_test_id("res-extend").click()
    new_end = running.end + dt.timedelta(hours=1.5)
    expect(mine.get_by_test_id("res-window")).to_contain_text(f"→ {utc_minute(new_end)}")
    expect(mine.get_by_test_id("res-action-error")).to_have_text("")
    served = _at(api_get(page, base, running)["end"])
    assert abs(served - new_end) < dt.timedelta(milliseconds=1)  # the browser keeps ms
    running.refresh_from_db()
    assert abs(running.end - new_end) < dt.timedelta(milliseconds=1)
    assert all(abs(a.end - new_end) < dt.timedelta(milliseconds=1) for a in running.allocations.all())

    # releasing the running one early: its GPUs are free now (ending until the fabric confirms)
    # the dialog says a released reservation cannot come back; Escape keeps it
    mine.get_by_test_id("res-release").click()
    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog.get_by_role("heading")).to_have_text("Release a-running?")
    expect(dialog.get_by_test_id("confirm-text")).to_contain_text("8 GPUs are freed now")
    expect(dialog.get_by_test_id("confirm-undo")).to_contain_text("A released reservation cannot come back")
    page.screenshot(path="/tmp/confirm-release.png")
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(mine).to_have_attribute("data-status", "ready")
    assert api_get(page, base, running)["status"] == "ready"
    mine.get_by_test_id("res-release").click()
    page.get_by_test_id("confirm-act").click()
    expect(mine).to_have_attribute("data-status", "ending")
    expect(mine.get_by_test_id("res-extend")).to_have_count(0)
    expect(mine.get_by_test_id("res-release")).to_have_count(0)
    expect(quota.get_by_test_id("quota-used")).to_have_text("0")
    body = api_get(page, base, running)
    assert body["status"] == "ending"
    assert _at(body["end"]) <= timezone.now()
    # the pipeline confirms the partition is gone: the card follows on its own (it polls)
    lifecycle.fabric_verified(booked["fabric"].pk, {booked["theirs"].pkey}, change_id=0)
    expect(mine).to_have_attribute("data-status", "released")
    assert api_get(page, base, running)["status"] == "released"

    # a reload lists both, as they ended, in the finished table (not a card each); tenant B's
    # reservation was never touched
    open_my_reservations(page, base, cards=0)
    finished = page.get_by_test_id("finished-reservations")
    expect(finished.locator(f'[data-reservation="{later.pk}"]')).to_have_attribute("data-status", "cancelled")
    expect(finished.locator(f'[data-reservation="{running.pk}"]')).to_have_attribute("data-status", "released")
    expect(card(page, later)).to_have_count(0)
    booked["theirs"].refresh_from_db()
    assert booked["theirs"].status == S.READY


def test_cancel_and_extend_from_the_detail_page_and_errors_for_bad_input(page, live_server, login, admin_a, booked):
    base = live_server.url
    running, later = booked["running"], booked["later"]
    login("admin-a")

    # a zero-hour extension is refused by the API and the reason is shown
    page.goto(f"{base}/reservations/{running.pk}/")
    detail = page.get_by_test_id("reservation-detail")
    mine = detail.get_by_test_id("reservation")
    expect(mine.get_by_test_id("res-status")).to_have_text("ready")
    mine.get_by_test_id("res-extend-hours").fill("0")
    mine.get_by_test_id("res-extend").click()
    expect(mine.get_by_test_id("res-action-error")).to_contain_text(re.compile("later|hours"))
    assert _at(api_get(page, base, running)["end"]) == running.end

    # the future one is cancelled from its own page
    page.goto(f"{base}/reservations/{later.pk}/")
    theirs = page.get_by_test_id("reservation-detail").get_by_test_id("reservation")
    expect(theirs.get_by_test_id("res-status")).to_have_text("placed")
    theirs.get_by_test_id("res-cancel").click()
    page.get_by_test_id("confirm-act").click()
    expect(theirs.get_by_test_id("res-status")).to_have_text("cancelled")
    assert api_get(page, base, later)["status"] == "cancelled"

    # another tenant's reservation has no page and no API for tenant A
    assert page.goto(f"{base}/reservations/{booked['theirs'].pk}/").status == 404
    assert (
        page.request.post(
            f"{base}/api/reservations/{booked['theirs'].pk}/cancel/",
            headers={"X-CSRFToken": _csrf(page)},
        ).status
        == 404
    )


def _at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def _csrf(page) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
