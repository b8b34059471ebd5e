"""The fabric page's validation and port-health cards in the browser: the last validation with
its failed test, offenders and fix; the health policy, a port it isolated and its decisions with
the reservations crossing the port; the operator's button queues a validation the page follows.
Screenshot (1600×1000, Chromium) in test-artifacts/health/."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from console.fabric.models import Fabric, PortAdminState
from console.telemetry.models import PortDecision, ValidationRun
from designer.imports import phy
from scheduling.models import Node
from scheduling.services import inventory
from tests.fabric.lab_fixtures import su1_revision  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "health"
PHY = Path(__file__).resolve().parents[1] / "data" / "phy"


def test_the_validation_and_port_health_cards(login, operator, su1_revision, live_server, page):  # noqa: F811
    fabric = Fabric.objects.create(name="health-e2e", driver="lab", revision=su1_revision, config={"workdir": "/none"})
    now = timezone.now()
    verdicts = [
        {
            "code": "guids",
            "title": "Node and port GUIDs are unique",
            "status": "pass",
            "count": 0,
            "offenders": [],
            "fix": "",
            "seconds": 0.4,
        },
        {
            "code": "routes",
            "title": "Every host pair has a route (no missing entry, dead end or loop)",
            "status": "fail",
            "count": 7,
            "offenders": [
                f"to LID {10 + i} (su01-n0{i} HCA-1 port 1): su01-leaf-r1 sends it out port 33, which leads nowhere (a dead end)"
                for i in range(7)
            ],
            "fix": "Let the SM route again",
            "seconds": 0.5,
        },
        {
            "code": "pkeys",
            "title": "P_Key tables carry the partitions the console applied",
            "status": "skip",
            "count": 0,
            "offenders": [],
            "fix": "",
            "why": "the console has applied nothing to this fabric yet",
            "seconds": 0.0,
        },
    ]
    # the PHY test's own verdict on a recorded mlxlink reading (a hot module)
    hot = phy.parse((PHY / "hot_ndr_optic.txt").read_text())
    verdicts.append({**phy.phy({"su01-leaf-r1 (S-0002c90200000001) port 9": hot}).as_dict(), "seconds": 0.1})
    ValidationRun.objects.create(
        fabric=fabric, state="done", ok=False, verdicts=verdicts, trigger="schedule", finished_at=now, duration_s=2.6
    )
    PortAdminState.objects.create(
        fabric=fabric,
        switch="su01-leaf-r2",
        port=5,
        enabled=False,
        reason="ibconsole health: SymbolErrorCounter +57 in 60 s > 10 per 3600 s",
    )
    PortDecision.objects.create(
        fabric=fabric,
        switch="su01-leaf-r2",
        port=5,
        link="su01-leaf-r2[5] — su01-n05[2] (NDR-DAC)",
        kind="isolate",
        dry_run=False,
        reasons=["SymbolErrorCounter +57 in 60 s > 10 per 3600 s"],
        samples=[],
        reservations=[{"id": 41, "tenant": 1}],
        at=now - dt.timedelta(minutes=3),
    )
    inventory.import_inventory(fabric)
    lost = Node.objects.filter(fabric=fabric).order_by("name").first()
    Node.objects.filter(pk=lost.pk).update(
        state="draining", path_lost="ibconsole: link su01-leaf-r1/1 down (1 of 8 of its ports)"
    )
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_viewport_size({"width": 1600, "height": 1000})
    SHOTS.mkdir(parents=True, exist_ok=True)
    login("op")

    page.goto(f"{live_server.url}/fabrics/{fabric.pk}/?discover=false")
    card = page.get_by_test_id("validation")
    expect(card).to_contain_text("2 of 4 tests failed: routes, phy")
    routes = card.locator('tr[data-code="routes"]')
    expect(routes).to_contain_text("fail (7)")
    expect(routes).to_contain_text("and 2 more (in the report)")
    expect(card.locator('tr[data-code="pkeys"]')).to_contain_text("the console has applied nothing")
    expect(card.locator('tr[data-code="phy"]')).to_contain_text("port 9: module at 79 °C, above 75 °C")
    health = page.get_by_test_id("port-health")
    expect(health.get_by_test_id("isolated-ports")).to_contain_text(
        "su01-leaf-r2 port 5 — ibconsole health: SymbolErrorCounter +57"
    )
    expect(health.get_by_test_id("port-decisions")).to_contain_text("su01-n05[2]")
    expect(health.get_by_test_id("lost-nodes")).to_contain_text(
        f"{lost.name} (draining) — ibconsole: link su01-leaf-r1/1 down"
    )
    card.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "fabric-health.png"), full_page=True)

    page.get_by_test_id("run-validation").click()
    expect(page.get_by_test_id("validation-state")).to_contain_text("queued")
    assert ValidationRun.objects.filter(fabric=fabric, trigger="page").count() == 1
    assert errors == []
