"""Energy in Chromium: the operator's dashboard card and the usage page's energy chart, drawn by
Chart.js under the strict CSP, with no serious or critical axe-core finding (the figures
themselves: tests/power/test_energy_pages.py).

Set ``DASHBOARD_SCREENSHOTS`` to a directory to keep both pictures.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e import axe
from tests.power.test_energy import history, recent, world  # noqa: F401  (fixtures, helpers)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def _shoot(page, name: str) -> None:
    where = os.environ.get("DASHBOARD_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(where) / f"{name}.png"), full_page=True)


def test_operator_sees_the_energy_card_and_chart(world, history, operator, login, live_server, page):  # noqa: F811
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.set_viewport_size({"width": 1600, "height": 1000})
    recent(world)
    login("op")
    card = page.get_by_test_id("dash-energy")
    expect(card).to_be_visible()
    # n1 idle 15 h and off 9 h, n2 idle 24 h (kWh worked out in tests/power/test_energy_pages.py)
    expect(card.get_by_test_id("energy-24h").get_by_test_id("energy-kwh")).to_have_text("70.6")
    assert axe.blocking(axe.violations(page)) == []
    _shoot(page, "energy-dashboard")
    page.goto(f"{live_server.url}/usage/?start=2026-01-01&end=2026-01-03")
    expect(page.locator("#energy-chart[data-drawn=true]")).to_be_attached()
    expect(page.get_by_test_id("energy-pools").locator("tbody tr")).to_have_count(3)  # alpha, beta, total
    assert axe.blocking(axe.violations(page)) == []
    _shoot(page, "energy-usage")
    assert not [e for e in errors if "Content Security Policy" in e or "Refused" in e]
