"""The ports, events and quota tables in the browser: filter with the form, sort by a header,
download the CSV of what is shown. Screenshots (1600×1000, Chromium) in test-artifacts/tables/."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from tests.live.fabric_fixtures import world  # noqa: F401  (fixture)
from tests.live.test_fabric_tables import _event, ports  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "tables"


def test_the_operator_filters_sorts_and_exports_ports_events_and_quotas(login, operator, ports, live_server, page):  # noqa: F811
    fabric = ports["fabric"]
    _event(fabric, "link_down", "critical", ports["down"], 12)
    _event(fabric, "link_errors", "warning", ports["erring"], 7, status="acknowledged")
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_viewport_size({"width": 1600, "height": 1000})
    SHOTS.mkdir(parents=True, exist_ok=True)
    login("op")

    # ports: congested only, then the hottest first; the CSV holds the two ends of the congested link
    page.goto(f"{live_server.url}{reverse('web:fabric', args=[fabric.pk])}?discover=false")
    page.get_by_test_id("fabric-ports-link").click()
    rows = page.get_by_test_id("port-row")
    expect(rows).to_have_count(50)  # one page of 1,024
    expect(page.get_by_test_id("port-count")).to_contain_text("1024 rows")
    page.get_by_test_id("sort-xmit_wait").click()
    page.get_by_test_id("sort-xmit_wait").click()
    expect(page.locator("th[aria-sort=descending]")).to_contain_text("Xmit wait (ticks/s)")
    expect(rows.first).to_contain_text("1,500 ticks/s")
    page.screenshot(path=str(SHOTS / "ports.png"))
    filters = page.get_by_test_id("port-filters")
    filters.get_by_label("Congested only").check()
    filters.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(2)
    with page.expect_download() as download_info:
        page.get_by_test_id("port-export").click()
    with open(download_info.value.path(), newline="") as f:
        exported = list(csv.DictReader(f))
    assert {r["Xmit wait (ticks/s)"] for r in exported} == {"1500"} and len(exported) == 2

    # events: from the live page's events card; filter by severity
    page.goto(f"{live_server.url}/fabrics/{fabric.pk}/live/")
    page.get_by_test_id("live-events-link").click()
    events = page.get_by_test_id("event-row")
    expect(events).to_have_count(2)
    expect(page.locator("th", has_text="Opened (UTC)")).to_be_visible()
    page.screenshot(path=str(SHOTS / "events.png"))
    page.get_by_test_id("event-filters").get_by_label("Severity").select_option("critical")
    page.get_by_test_id("event-filters").get_by_role("button", name="Filter").click()
    expect(events).to_have_count(1)
    expect(events.first).to_contain_text(ports["down"])

    # quotas: a unit on every figure, the inline editor still there
    page.goto(f"{live_server.url}/reservations/quotas/")
    expect(page.get_by_test_id("quota-row").first).to_contain_text("GPUs")
    expect(page.get_by_test_id("quota-save").first).to_be_visible()
    expect(page.get_by_test_id("quota-guaranteed").first).to_be_editable()
    expect(page.get_by_test_id("quota-row").first).not_to_contain_text("<input")
    page.screenshot(path=str(SHOTS / "quotas.png"))
    assert errors == []
