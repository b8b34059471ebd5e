"""The change-request list in the browser: reached from the fabric page, filtered by status with
the checkboxes, sorted by a column header, a push that restarted OpenSM flagged on its row and on
its own page; the auditor reads the same list. Screenshots land in test-artifacts/changes/."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from console.fabric.models import ChangeRequest
from tests.fabric.test_change_list import finish, new_change
from tests.scheduling.conftest import make_fabric

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "changes"
Status = ChangeRequest.Status


def test_the_operator_finds_filters_and_sorts_the_change_requests(login, operator, auditor, live_server, page):
    fabric = make_fabric("chg-e2e", {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"})
    restarted = finish(new_change(fabric, "QoS class for training"), Status.APPLIED, restarted=True, minutes_ago=40)
    failed = finish(new_change(fabric, "partition for res-7"), Status.FAILED, minutes_ago=25)
    applied = finish(new_change(fabric, "port leaf-01[20] disabled"), Status.APPLIED, minutes_ago=10)
    queued = new_change(fabric, "waiting for the worker")
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_viewport_size({"width": 1600, "height": 1000})
    SHOTS.mkdir(parents=True, exist_ok=True)
    rows = page.get_by_test_id("change-row")

    login("op")
    # from the fabric page to its change requests
    page.goto(f"{live_server.url}/fabrics/{fabric.pk}/?discover=false")
    page.get_by_test_id("fabric-changes-link").click()
    expect(page.get_by_role("heading", name=f"Change requests on {fabric.name}")).to_be_visible()
    expect(rows).to_have_count(4)
    expect(rows.first).to_have_attribute("data-change", str(queued.pk))  # newest first
    # the restart is flagged on its row only
    expect(page.get_by_test_id("restart-badge")).to_have_count(1)
    expect(page.locator(f'[data-change="{restarted.pk}"]').get_by_test_id("restart-badge")).to_be_visible()
    page.screenshot(path=str(SHOTS / "list.png"), full_page=True)

    # filter: failed and applied
    filters = page.get_by_test_id("change-filters")
    filters.get_by_label("Failed").check()
    filters.get_by_label("Applied").check()
    filters.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(3)
    expect(page.get_by_test_id("change-count")).to_contain_text("3 change requests")
    # sort oldest first by a header click; the filter stays
    page.get_by_test_id("sort-created").click()  # newest first is the default: this flips it
    expect(rows).to_have_count(3)
    ids = [rows.nth(i).get_attribute("data-change") for i in range(3)]
    assert ids == [str(restarted.pk), str(failed.pk), str(applied.pk)]
    expect(filters.get_by_label("Failed")).to_be_checked()
    page.screenshot(path=str(SHOTS / "list-filtered.png"), full_page=True)

    # the restarted push's own page says so prominently
    page.get_by_role("link", name=f"#{restarted.pk}").click()
    expect(page.get_by_test_id("restart-banner")).to_contain_text("This push restarted OpenSM")
    page.screenshot(path=str(SHOTS / "change-restarted.png"))
    page.get_by_test_id("all-changes-link").click()
    expect(rows).to_have_count(4)

    # the auditor reads the same list
    page.context.clear_cookies()
    login("aud")
    page.goto(f"{live_server.url}/fabrics/{fabric.pk}/changes/?opensm_restarted=true")
    expect(rows).to_have_count(1)
    assert errors == []
