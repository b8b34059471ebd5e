"""The usage page in Chromium: Chart.js draws the day chart under the strict CSP, and the table's
CSV export downloads the rows a tenant sees (its own only)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.scheduling.conftest import fat_tree, pool  # noqa: F401  (fixtures)
from tests.scheduling.test_usage_api import world  # noqa: F401  (fixture: tenants A and B, 1 – 3 Nov 2026)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def test_tenant_sees_its_chart_drawn_and_exports_its_rows(world, member_a, login, live_server, page):  # noqa: F811
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    login("member-a")
    page.locator("[data-nav=usage]").click()
    page.goto(f"{live_server.url}/usage/?start=2026-11-01&end=2026-11-03&group_by=reservation")
    expect(page.locator("#usage-chart[data-drawn=true]")).to_be_attached()
    expect(page.get_by_test_id("usage-total-hours")).to_have_text("40.0")
    expect(page.get_by_test_id("usage-row")).to_have_count(2)
    with page.expect_download() as download:
        page.get_by_test_id("usage-export").click()
    text = open(download.value.path(), encoding="utf-8").read()
    assert "train-a" in text and "Tenant B" not in text
    assert not [e for e in errors if "Content Security Policy" in e or "Refused" in e]
