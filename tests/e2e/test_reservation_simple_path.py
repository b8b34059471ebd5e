"""The simple reservation path in the browser: a tenant reserves in three clicks (defaults, a size
button, Reserve), the preview says what it costs and how much quota it uses, and a refused
request offers what fits, one click taking it.

No lab: a designed fat tree of 8 DGX H100 split into two pools of 4 nodes (32 GPUs); tenant A has
a quota in the second only (so preselecting it is the page's doing). The page talks to the real
REST API of a live server.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from playwright.sync_api import Locator, expect

from scheduling.models import GpuHourPrice, Node, Reservation
from tests.scheduling.conftest import give_quota, make_fabric, make_pool

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

SHOTS = "test-artifacts"
PRICE = Decimal("2.50")  # a GPU-hour of training in tenant A's pool


@pytest.fixture
def mine(tenant_a):
    """Pool ``b-mine`` (tenant A: 24 guaranteed GPUs, training at 2.50 a GPU-hour) beside pool
    ``a-other`` (no quota for A)."""
    fabric = make_fabric("e2e-simple", {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"})
    nodes = list(Node.objects.filter(fabric=fabric).order_by("name"))
    make_pool(fabric, "a-other", nodes[:4])
    pool = make_pool(fabric, "b-mine", nodes[4:])
    give_quota(tenant_a, pool, 24)
    GpuHourPrice.objects.create(pool=pool, priority_class="training", price=PRICE)
    return pool


def test_a_tenant_reserves_in_three_clicks(page, live_server, login, admin_a, tenant_a, mine):
    clicks = 0

    def click(target: Locator) -> None:
        nonlocal clicks
        clicks += 1
        target.click()

    page.set_viewport_size({"width": 1600, "height": 1000})
    login("admin-a")
    # 1: the navigation's Reservations; the form is the first thing, its pool the tenant's
    click(page.get_by_test_id("nav").get_by_role("link", name="Reservations"))
    expect(page.locator("body[data-reservations=ready]")).to_be_attached()
    expect(page.get_by_test_id("res-pool")).to_have_value(str(mine.pk))
    expect(page.get_by_test_id("res-advanced")).not_to_have_attribute("open", "")
    expect(page.get_by_test_id("preview-state")).to_have_text("placeable")
    page.screenshot(path=f"{SHOTS}/simple-form-defaults.png")
    # 2: the "16 GPUs" button; the preview says the cost and the quota it uses
    click(page.get_by_test_id("res-preset-16"))
    gpu_hours = 16 * 1  # the default duration is one hour
    expect(page.get_by_test_id("preview-cost")).to_have_text(f"≈ ${gpu_hours * PRICE:.2f} for {gpu_hours} GPU-hours")
    expect(page.get_by_test_id("preview-quota")).to_have_text("Uses 16 of your 24 guaranteed GPUs.")
    expect(page.get_by_test_id("preview-summary")).to_contain_text("16 GPUs on 2 nodes")
    page.screenshot(path=f"{SHOTS}/simple-form-preview.png")
    # 3: Reserve
    click(page.get_by_test_id("res-submit"))
    expect(page.get_by_test_id("reservation")).to_have_count(1)

    assert clicks == 3
    made = Reservation.objects.get(tenant=tenant_a)
    assert made.pool_id == mine.pk and made.gpus == 16
    assert made.status in {Reservation.Status.PLACED, Reservation.Status.PROVISIONING}
    assert re.fullmatch(r"tenant-a-16g-[0-9a-f]{4}", made.name)  # generated: no name was typed
    listed = page.request.get(f"{live_server.url}/api/reservations/").json()["results"]
    assert [(r["id"], r["gpus"]) for r in listed] == [(made.pk, 16)]


def test_a_refused_request_offers_what_fits_and_one_click_takes_it(page, live_server, login, admin_a, tenant_a, mine):
    page.set_viewport_size({"width": 1600, "height": 1000})
    login("admin-a")
    page.goto(f"{live_server.url}/reservations/")
    expect(page.locator("body[data-reservations=ready]")).to_be_attached()
    # 32 GPUs are over the quota of 24: refused, Reserve disabled, offers shown
    page.get_by_test_id("res-size").fill("32")
    expect(page.get_by_test_id("preview-state")).to_have_text("refused")
    expect(page.get_by_test_id("res-submit")).to_be_disabled()
    offers = page.get_by_test_id("offer")
    headroom = 24
    now = offers.filter(has_text=f"{headroom} GPUs now")
    expect(now).to_have_attribute("data-kind", "smaller_now")
    expect(offers.and_(page.locator("[data-kind=queue]"))).to_have_count(0)  # 32 never fits a quota of 24
    page.screenshot(path=f"{SHOTS}/simple-form-refused.png")
    assert not Reservation.objects.exists()

    # one click on "24 GPUs now" reserves 24 GPUs now
    now.click()
    expect(page.get_by_test_id("reservation")).to_have_count(1)
    made = Reservation.objects.get(tenant=tenant_a)
    assert made.gpus == headroom and made.pool_id == mine.pk
    assert made.status in {Reservation.Status.PLACED, Reservation.Status.PROVISIONING}
    expect(page.get_by_test_id("res-size")).to_have_value(str(headroom))

    # with the quota full, 16 more GPUs fit only when those 24 end: that start, or the queue
    page.get_by_test_id("res-preset-16").click()
    expect(page.get_by_test_id("preview-state")).to_have_text("refused")
    later = offers.and_(page.locator("[data-kind=later]"))
    at = made.end.replace(second=0, microsecond=0)
    at += dt.timedelta(minutes=1 if at != made.end else 0)  # offered starts are whole minutes, rounded up
    expect(later).to_have_text(f"16 GPUs at {at:%Y-%m-%d %H:%M} UTC")
    expect(offers.and_(page.locator("[data-kind=queue]"))).to_have_count(1)
    expect(offers.and_(page.locator("[data-kind=smaller_now]"))).to_have_count(0)
    page.get_by_test_id("res-advanced").locator("summary").click()
    page.screenshot(path=f"{SHOTS}/simple-form-later-advanced.png", full_page=True)
    later.click()
    expect(page.get_by_test_id("reservation")).to_have_count(2)
    second = Reservation.objects.exclude(pk=made.pk).get(tenant=tenant_a)
    assert second.gpus == 16 and second.start == at

    # "as soon as possible" for what does not fit now: Reserve stays enabled and says it queues
    page.get_by_test_id("res-when-asap").check()
    expect(page.get_by_test_id("preview-state")).to_have_text("will queue")
    expect(page.get_by_test_id("res-submit")).to_be_enabled()
    expect(page.get_by_test_id("res-submit")).to_have_text("Queue it")


def test_a_request_in_nodes_is_offered_nodes_and_one_click_keeps_the_unit(
    page, live_server, login, admin_a, tenant_a, mine
):
    page.set_viewport_size({"width": 1600, "height": 1000})
    login("admin-a")
    page.goto(f"{live_server.url}/reservations/")
    expect(page.locator("body[data-reservations=ready]")).to_be_attached()
    # 4 whole nodes (32 GPUs) are over the quota of 24: the offer is in nodes, not GPUs
    page.get_by_test_id("res-size-by").select_option("nodes")
    page.get_by_test_id("res-size").fill("4")
    expect(page.get_by_test_id("preview-state")).to_have_text("refused")
    now = page.get_by_test_id("offer").and_(page.locator("[data-kind=smaller_now]"))
    expect(now).to_have_text("3 nodes (24 GPUs) now")
    expect(now).to_have_attribute("data-nodes", "3")
    page.screenshot(path=f"{SHOTS}/simple-form-refused-nodes.png")
    # one click reserves 3 whole nodes, and the form still speaks in nodes
    now.click()
    expect(page.get_by_test_id("reservation")).to_have_count(1)
    expect(page.get_by_test_id("res-size-by")).to_have_value("nodes")
    expect(page.get_by_test_id("res-size")).to_have_value("3")
    made = Reservation.objects.get(tenant=tenant_a)
    assert made.gpus == 24 and len(made.placement["nodes"]) == 3
