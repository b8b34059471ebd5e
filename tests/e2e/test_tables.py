"""The console's tables in the browser: sort by clicking a header (aria-sort follows), filter with
the GET form, download the CSV of what is shown (filters kept) and read its rows. Screenshots of
the all-reservations and audit log pages (1600×1000, Chromium) land in test-artifacts/tables/."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.scheduling.conftest import fat_tree, pool  # noqa: F401  (fixtures)
from tests.scheduling.test_reservation_pages import booked  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "tables"


def test_the_operator_sorts_filters_and_exports_reservations(login, operator, booked, tenant_b, live_server, page):  # noqa: F811
    mine, theirs = booked
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_viewport_size({"width": 1600, "height": 1000})
    SHOTS.mkdir(parents=True, exist_ok=True)
    rows = page.get_by_test_id("all-row")

    login("op")
    page.goto(f"{live_server.url}/reservations/all/")
    expect(rows).to_have_count(2)
    # sort by GPUs, smallest first, by clicking the header; again for largest first
    page.get_by_test_id("sort-gpus").click()
    expect(page.locator("th[aria-sort=ascending]")).to_contain_text("GPUs")
    expect(rows.first).to_have_attribute("data-reservation", str(theirs.pk))
    page.get_by_test_id("sort-gpus").click()
    expect(page.locator("th[aria-sort=descending]")).to_contain_text("GPUs")
    expect(rows.first).to_have_attribute("data-reservation", str(mine.pk))
    page.screenshot(path=str(SHOTS / "all-reservations.png"))

    # filter by tenant: the sort stays
    filters = page.get_by_test_id("reservation-filters")
    filters.get_by_label("Tenant").select_option(label=tenant_b.name)
    filters.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-reservation", str(theirs.pk))
    expect(page.locator("th[aria-sort=descending]")).to_contain_text("GPUs")

    # the CSV holds what the page shows
    with page.expect_download() as download_info:
        page.get_by_test_id("reservation-export").click()
    download = download_info.value
    assert download.suggested_filename.startswith("reservations-all-") and download.suggested_filename.endswith(".csv")
    with open(download.path(), newline="") as f:
        exported = list(csv.DictReader(f))
    assert [(r["Reservation"], r["Tenant"], r["GPUs"]) for r in exported] == [("b-infer", tenant_b.name, "8")]

    # the audit log reads as sentences, the code beside them
    page.goto(f"{live_server.url}/audit/")
    expect(page.get_by_text("reserved reservation b-infer (8 GPUs) on fabric")).to_be_visible()
    expect(page.locator("code", has_text="reservation.create").first).to_be_visible()
    page.screenshot(path=str(SHOTS / "audit-log.png"))
    assert errors == []
