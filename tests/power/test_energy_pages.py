"""Energy on the pages: the operator's dashboard card (last 24 h and 7 days) and the usage page's
section (per pool, chart per UTC day), with the figures worked out here by hand."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest

from scheduling.models import Pool
from tests.power.test_energy import BUSY, IDLE, OFF, history, kwh, recent, world  # noqa: F401
from tests.scheduling.conftest import make_fabric, make_pool

pytestmark = pytest.mark.django_db


def _tile(html: str, key: str) -> dict[str, str]:
    start = html.index(f'data-testid="energy-{key}"')
    tile = html[start : html.index("</div>", start)]
    return dict(re.findall(r'data-testid="energy-([a-z-]+)">([^<]+)<', tile))


def test_the_dashboard_card_shows_kwh_drawn_always_on_and_saved(world, operator, auditor, session_client_for):  # noqa: F811
    recent(world)
    # last 24 h: n1 idle 15 h and off 9 h, n2 idle 24 h
    day = kwh(IDLE, 15) + kwh(OFF, 9) + kwh(IDLE, 24)
    day_always = kwh(IDLE, 48)
    # last 7 days: n1 off 120 h (before its first event), idle 39 h, off 9 h; n2 idle 168 h
    week = kwh(OFF, 129) + kwh(IDLE, 39) + kwh(IDLE, 168)
    week_always = kwh(IDLE, 2 * 168)
    for user in (operator, auditor):
        html = session_client_for(user).get("/").content.decode()
        assert 'data-testid="dash-energy"' in html
        for key, (used, always) in {"24h": (day, day_always), "7days": (week, week_always)}.items():
            tile = _tile(html, key)
            assert tile["kwh"] == f"{used:,.1f}", (key, tile)
            assert tile["always-on"] == f"{always:,.1f}"
            assert tile["saved"] == f"{1 - used / always:.1%}"
    assert (f"{day:.1f}", f"{week:.1f}") == ("70.6", "378.4")  # the arithmetic above, once by hand


def test_the_dashboard_poll_and_tenants_get_no_energy_card(world, operator, admin_a, session_client_for):  # noqa: F811
    polled = session_client_for(operator).get("/", HTTP_X_DASHBOARD_POLL="1").content.decode()
    assert 'id="dashboard"' in polled and "dash-energy" not in polled
    assert "dash-energy" not in session_client_for(admin_a).get("/").content.decode()


def test_the_usage_page_shows_energy_per_pool_and_day(world, history, operator, admin_a, session_client_for):  # noqa: F811
    page = session_client_for(operator).get("/usage/", {"start": "2026-01-01", "end": "2026-01-03"})
    html = page.content.decode()
    # n1 over 1-2 January: off until 10:00, idle to 21:00, 4 of 8 GPUs 21:00-23:00, idle
    # (shutting down) to 23:35, off to 02:00, booting 10 min, idle to midnight; n2 off
    half = IDLE + 0.5 * (BUSY - IDLE)
    n1_day1 = kwh(OFF, 10) + kwh(IDLE, 11) + kwh(half, 2) + kwh(IDLE, 35 / 60) + kwh(OFF, 25 / 60)
    n1_day2 = kwh(OFF, 2) + kwh(BUSY, 10 / 60) + kwh(IDLE, 21 + 50 / 60)
    total = n1_day1 + n1_day2 + kwh(OFF, 48)
    # always on: every hour idle but the two half-busy ones
    day1_always, day2_always = kwh(IDLE, 46) + kwh(half, 2), kwh(IDLE, 48)
    start = html.index('data-testid="energy-total"')
    total_row = html[start : html.index("</tr>", start)]
    assert f"<th>{total:,.1f}</th>" in total_row and f"<th>{day1_always + day2_always:,.1f}</th>" in total_row
    data = json.loads(re.search(r'<script id="energy-chart-data" type="application/json">(.*?)</script>', html)[1])
    assert data["days"] == ["2026-01-01", "2026-01-02"]
    series = {s["label"]: s["data"] for s in data["series"]}
    assert series["energy / alpha"] == pytest.approx([n1_day1, n1_day2], abs=1e-3)
    assert series["energy / beta"] == pytest.approx([kwh(OFF, 24)] * 2, abs=1e-3)
    assert data["always_on"] == pytest.approx([day1_always, day2_always], abs=1e-3)
    # a tenant's usage page has no energy section
    tenant_html = session_client_for(admin_a).get("/usage/").content.decode()
    assert "usage-energy" not in tenant_html and "energy-chart-data" not in tenant_html


def test_the_demo_seed_records_nights_off_that_the_energy_report_counts(operator, client_for):
    from django.utils import timezone

    from console.demo import DEMO_NIGHTS, seed_all

    assert any("power events" in line for line in seed_all())
    assert not [line for line in seed_all() if "power events" in line]  # idempotent
    nodes_off, off_hour, on_hour = DEMO_NIGHTS
    assert (nodes_off, off_hour, on_hour) == (12, 22, 6)
    # the night from the day before yesterday to yesterday, 23:00 to 05:00 UTC: 12 of the 32
    # nodes of the first site off, its 20 others and the second site's 8 on and idle
    today = timezone.now().astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    window = {
        "from": (today - dt.timedelta(days=1, hours=1)).isoformat(),
        "to": (today - dt.timedelta(days=1) + dt.timedelta(hours=5)).isoformat(),
    }
    body = client_for(operator).get("/api/energy/", window).json()
    assert body["nodes"] == 40, body
    assert body["total"]["kwh"] == pytest.approx(kwh(OFF, 12 * 6) + kwh(IDLE, 28 * 6), abs=1e-3)
    assert body["total"]["kwh_always_on"] == pytest.approx(kwh(IDLE, 40 * 6), abs=1e-3)


def test_the_energy_chart_counts_a_node_of_two_pools_once(world, history, operator, session_client_for):  # noqa: F811
    # given n1 in a second pool too, "span", whose other node is on another fabric (as the demo's
    # pool spanning both sites holds the first site's nodes)
    other = make_fabric("energy-far", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    far = other.nodes.order_by("name").first()
    Pool.objects.filter(fabric=other).delete()
    make_pool(world["fabric"], "span", [world["n1"], far])
    html = session_client_for(operator).get("/usage/", {"start": "2026-01-01", "end": "2026-01-03"}).content.decode()
    data = json.loads(re.search(r'<script id="energy-chart-data" type="application/json">(.*?)</script>', html)[1])
    series = {s["label"]: s["data"] for s in data["series"]}
    # n1's kWh is one segment, "alpha + span", not a bar in alpha and another in span
    assert set(series) == {
        "energy / alpha + span (spanning energy, energy-far)",
        "energy / beta",
        "span (spanning energy, energy-far)",
        "(no pool)",  # the far fabric's other node
    }, set(series)
    # so each day's bars add up to what the nodes drew, under the always-on line
    for i in range(len(data["days"])):
        stacked = sum(s[i] for s in series.values())
        assert stacked <= data["always_on"][i] + 1e-6, (stacked, data["always_on"][i])
