"""Designer and reservation forms: only the chosen topology's fields, nothing clipped, tooling notes
apart from design findings, units on figures and one time convention (24-hour UTC) for input and output.

No lab: a designed 1-SU fabric with its inventory and a pool; the browser talks to a live server.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid

import pytest
from playwright.sync_api import expect

from console.fabric.models import Fabric
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from designer.services import create_design
from scheduling.models import Node, Pool, Reservation
from scheduling.services import inventory, quotas
from scheduling.services.reservations import ReservationRequest, reserve

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
ACTOR = Actor.system("e2e")
OPERATOR = Principal(None, Role.OPERATOR, None)


@pytest.fixture
def su1_pool(tenant_a):
    uid = uuid.uuid4().hex[:6]
    _, revision = create_design(ACTOR, OPERATOR, name=f"e2e-forms-{uid}", options=ONE_SU)
    fabric = Fabric.objects.create(name=f"e2e-forms-{uid}", revision=revision)
    inventory.import_inventory(fabric)
    pool = inventory.create_pool(
        ACTOR, OPERATOR, fabric=fabric, name="su1", kind=Pool.Kind.BY_SU, nodes=list(Node.objects.filter(fabric=fabric))
    )
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    return pool


def inside(inner: dict, outer: dict) -> bool:
    return (
        inner["x"] >= outer["x"] - 0.5
        and inner["y"] >= outer["y"] - 0.5
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 0.5
    )


def test_designer_shows_only_the_chosen_topologys_fields_unclipped(login, operator):
    page = login("op")
    page.get_by_test_id("nav").get_by_role("link", name="Designer").click()
    form = page.get_by_test_id("plan-form")
    manager, dims, hosts = (
        page.get_by_test_id("opt-manager-slot"),
        page.get_by_test_id("opt-dims"),
        page.get_by_test_id("opt-hosts-per-switch"),
    )
    gpus_per_node = page.get_by_test_id("opt-gpus-per-node")

    # rail-optimised: the manager slot only; hidden rows are really not displayed
    page.get_by_test_id("opt-topology").select_option("rail-optimized")
    expect(manager).to_be_visible()
    for field in (dims, hosts, gpus_per_node):
        expect(field).to_be_hidden()
    assert form.locator("[data-show][hidden]").evaluate_all(
        "els => els.every(e => getComputedStyle(e).display === 'none')"
    )

    page.get_by_test_id("opt-topology").select_option("torus")
    expect(dims).to_be_visible()
    expect(hosts).to_be_visible()
    expect(manager).to_be_hidden()

    page.get_by_test_id("opt-topology").select_option("dragonfly-plus")
    expect(hosts).to_be_visible()
    expect(dims).to_be_hidden()
    expect(manager).to_be_hidden()

    page.get_by_test_id("opt-node-type").select_option("generic")
    expect(gpus_per_node).to_be_visible()

    # the switch select lies within its label and the form's card, none of it cut off
    switch = page.get_by_test_id("opt-switch")
    box = switch.bounding_box()
    assert box and box["width"] > 0
    assert inside(box, switch.locator("xpath=..").bounding_box())
    assert inside(box, page.get_by_test_id("plan-form").locator("xpath=..").bounding_box())
    # a select does not scroll: measure its chosen option's text against the room inside it
    # (its width less padding and the ~24 px drop-down arrow)
    room, text = switch.evaluate(
        """e => {
          const cs = getComputedStyle(e);
          const ctx = document.createElement('canvas').getContext('2d');
          ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
          const room = e.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 24;
          return [room, ctx.measureText(e.options[e.selectedIndex].text).width];
        }"""
    )
    assert text <= room, f"switch label {text:.0f} px in {room:.0f} px"
    page.get_by_test_id("opt-node-type").select_option("DGX-H100")
    page.screenshot(path="/tmp/i15-forms-designer.png", full_page=True)


def test_ibsim_note_is_a_tooling_note_that_explains_its_node_count(login, operator):
    page = login("op")
    page.get_by_test_id("nav").get_by_role("link", name="Designer").click()
    page.get_by_test_id("opt-topology").select_option("rail-optimized")
    page.get_by_test_id("opt-size").fill("2048")
    preview = page.get_by_test_id("preview")
    expect(preview.get_by_test_id("sum-nodes")).to_have_text("256")
    notes = preview.get_by_test_id("tooling-notes")
    expect(notes).to_contain_text("2,144 IB nodes (2,048 HCAs in 256 servers + 96 switches)")
    expect(notes).to_contain_text("Lab tooling notes")
    # the design findings list holds no tooling note
    expect(preview.get_by_test_id("issues").locator("[data-code=ibsim-limit]")).to_have_count(0)
    preview.screenshot(path="/tmp/i15-forms-designer-2048.png")


def test_reservation_start_is_typed_as_24_hour_utc(login, admin_a, su1_pool):
    page = login("admin-a")
    page.get_by_test_id("nav").get_by_role("link", name="Reservations").click()
    expect(page.locator("body[data-reservations=ready]")).to_be_attached()
    expect(page.get_by_test_id("quota-table")).to_contain_text("Guaranteed (GPUs)")
    start = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).replace(hour=17, minute=45, second=0, microsecond=0)
    field = page.get_by_test_id("res-start")
    assert field.get_attribute("type") == "text"
    expect(page.get_by_test_id("reserve-form")).to_contain_text("UTC, 24-hour")

    page.get_by_test_id("res-name").fill("e2e-at-1745")
    page.get_by_test_id("res-size").fill("8")
    page.get_by_test_id("res-when-window").check()
    field.fill("2026-13-40 25:00")
    expect(page.get_by_test_id("preview-state")).to_have_text("incomplete")
    field.fill(start.strftime("%Y-%m-%d %H:%M"))
    expect(page.get_by_test_id("preview-state")).to_have_text("placeable")
    page.screenshot(path="/tmp/i15-forms-reservation.png", full_page=True)
    page.get_by_test_id("res-submit").click()
    card = page.get_by_test_id("reservation").filter(has_text="e2e-at-1745")
    expect(card).to_contain_text(start.strftime("%Y-%m-%d 17:45 UTC"))
    assert Reservation.objects.get(name="e2e-at-1745").start == start


def test_api_docs_sit_inside_the_console_frame(login, operator):
    page = login("op")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.get_by_test_id("nav").get_by_role("link", name="API docs").click()
    # Swagger UI fetches and renders the whole schema: slow on a loaded machine
    expect(page.locator(".swagger-ui .info")).to_contain_text("InfiniBand console API", timeout=20_000)
    nav = page.get_by_test_id("nav")
    expect(nav.get_by_role("link", name="Designer")).to_be_visible()
    expect(nav.locator("a[aria-current=page]")).to_have_text("API docs")
    expect(page.get_by_test_id("whoami")).to_have_text("op")
    expect(page.locator(".opblock").first).to_be_visible(timeout=20_000)
    page.screenshot(path="/tmp/i15-forms-api-docs.png")
    assert not errors, errors


TIMESTAMP = re.compile(r"(?:\d{4}-)?\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?")


def unzoned_timestamps(text: str) -> list[str]:
    """Timestamps not followed by "UTC" (the start of an "A → B UTC" range counts as zoned)."""
    bad = []
    for m in TIMESTAMP.finditer(text):
        after = text[m.end() : m.end() + 6].lstrip()
        if not (after.startswith("UTC") or after.startswith("→")):
            bad.append(text[max(0, m.start() - 20) : m.end() + 10])
    return bad


def test_timestamps_on_pages_carry_utc(login, operator, su1_pool, tenant_a, live_server):
    admin = Principal(None, Role.TENANT_ADMIN, tenant_a.pk)
    reserve(ACTOR, admin, ReservationRequest(pool_id=su1_pool.pk, gpus=8, name="zoned", duration=dt.timedelta(hours=2)))
    page = login("op")
    for path, ready in (
        ("/reservations/", "[data-testid=timeline]"),
        ("/reservations/all/", "body"),
        ("/audit/", "body"),
    ):
        page.goto(f"{live_server.url}{path}")
        expect(page.locator(ready).first).to_be_visible()
        if path == "/reservations/":
            expect(page.get_by_test_id("reservation").filter(has_text="zoned")).to_contain_text("UTC")
        text = page.locator("main").inner_text()
        assert TIMESTAMP.search(text), f"{path}: no timestamp to check"
        assert not unzoned_timestamps(text), (path, unzoned_timestamps(text))
