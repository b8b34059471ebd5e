"""The usage page through the Django client: a tenant sees only itself (chart stacked by pool),
an operator every tenant (stacked by tenant); the chart's canvas and data, the CSV export, the
window selector. The world is tests/scheduling/test_usage_api.py's (window 1 – 3 Nov 2026)."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from tests.scheduling.test_usage_api import world  # noqa: F401  (the shared fixture)

pytestmark = pytest.mark.django_db

WINDOW = {"start": "2026-11-01", "end": "2026-11-03"}


def chart_data(html: str) -> dict:
    start = html.index('id="usage-chart-data"')
    return json.loads(html[html.index(">", start) + 1 : html.index("</script>", start)])


def test_operator_page_has_the_chart_stacked_by_tenant_and_a_table(world, client, operator):  # noqa: F811
    client.force_login(operator)
    response = client.get("/usage/", WINDOW)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="usage-chart"' in html and "<canvas" in html
    data = chart_data(html)
    assert data["days"] == ["2026-11-01", "2026-11-02"] and data["stack_by"] == "tenant"
    # A: 32 + 4 on the 1st, 4 on the 2nd; B: 4 on the 1st (see the API test's world)
    assert {s["label"]: s["data"] for s in data["series"]} == {"Tenant A": [36.0, 4.0], "Tenant B": [4.0, 0.0]}
    assert html.count('data-testid="usage-row"') == 2
    assert "2026-11-01 00:00 UTC" in html
    assert 'data-nav="usage" aria-current="page"' in html


def test_tenant_page_shows_only_itself_stacked_by_pool(world, client, member_a, pool):  # noqa: F811
    client.force_login(member_a)
    html = client.get("/usage/", {**WINDOW, "group_by": "reservation"}).content.decode()
    assert "Tenant B" not in html
    data = chart_data(html)
    assert data["stack_by"] == "pool" and [s["label"] for s in data["series"]] == [pool.name]
    assert html.count('data-testid="usage-row"') == 2  # r1 and r2; never B's r4
    assert 'name="tenant"' not in html  # no tenant selector for tenants


def test_csv_export_of_the_page(world, client, operator):  # noqa: F811
    client.force_login(operator)
    response = client.get("/usage/", {**WINDOW, "group_by": "day", "_export": "csv"})
    assert response.status_code == 200 and "text/csv" in response["Content-Type"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["Day (UTC)"], r["GPU-hours"], r["Cost (EUR)"]) for r in rows] == [
        # r1 32 × 2.50 + r2 4 × 2.00 + r4 4 × 2.50 = 80 + 8 + 10
        ("2026-11-01 (UTC)", "40.000", "98.00"),
        ("2026-11-02 (UTC)", "4.000", "8.00"),
    ]


def test_an_inverted_window_says_so(world, client, operator):  # noqa: F811
    client.force_login(operator)
    html = client.get("/usage/", {"start": "2026-11-03", "end": "2026-11-01"}).content.decode()
    assert "&#x27;to&#x27; must be after &#x27;from&#x27;" in html or "must be after" in html


def test_the_prices_the_costs_were_computed_with(world, client, member_a, pool):  # noqa: F811
    from decimal import Decimal

    from scheduling.models import GpuHourPrice

    GpuHourPrice.objects.create(pool=pool, priority_class="training", price=Decimal("3.00"))
    client.force_login(member_a)
    html = client.get("/usage/", WINDOW).content.decode()
    prices = html[html.index('data-testid="usage-prices"') :]
    # training: the pool's own 3.00; inference: the setting's 2.00, marked as the default
    assert "<td>3.00</td>" in prices and '2.00 <span class="muted">(default)</span>' in prices


def test_window_inputs_are_iso_utc_dates_and_a_locale_date_is_refused(world, client, operator):  # noqa: F811
    client.force_login(operator)
    html = client.get("/usage/", WINDOW).content.decode()
    start = html.index('data-testid="usage-window-form"')
    form = html[start : html.index("</form>", start)]
    # text inputs holding the ISO date, never a type=date picker (drawn in the reader's locale)
    assert 'type="date"' not in form
    assert 'name="start" value="2026-11-01"' in form and 'name="end" value="2026-11-03"' in form
    assert form.count('placeholder="YYYY-MM-DD"') == 2 and "From (UTC)" in form and "To (UTC" in form
    # a locale-formatted date is ambiguous (11/02: 2 Nov or 11 Feb?): refused, not guessed
    refused = client.get("/usage/", {"start": "11/02/2026", "end": "2026-11-03"}).content.decode()
    assert 'data-testid="usage-window-errors"' in refused and "start: Enter a valid date." in refused


def test_chart_table_and_csv_agree_across_utc_midnight(world, client, operator):  # noqa: F811
    # r2 runs 1 Nov 23:00 – 2 Nov 01:00 UTC (preempted), r4 31 Oct 22:00 – 1 Nov 02:00: both cross midnight
    client.force_login(operator)
    html = client.get("/usage/", {**WINDOW, "group_by": "day"}).content.decode()
    data = chart_data(html)
    chart = [round(sum(s["data"][i] for s in data["series"]), 3) for i in range(len(data["days"]))]
    table = html[html.index('data-testid="usage-table"') :]
    shown = [
        (day, float(hours))
        for day, hours in re.findall(r"<td[^>]*>(\d{4}-\d{2}-\d{2}) \(UTC\)</td>\s*<td[^>]*>([\d.,]+)</td>", table)
    ]
    response = client.get("/usage/", {**WINDOW, "group_by": "day", "_export": "csv"})
    exported = [
        (r["Day (UTC)"].removesuffix(" (UTC)"), float(r["GPU-hours"]))
        for r in csv.DictReader(io.StringIO(response.content.decode()))
    ]
    # independent reading (the world's bookings): 1 Nov: r1 32 + r2 1 h × 4 + r4 2 h × 2 = 40; 2 Nov: r2 1 h × 4 = 4
    expected = [("2026-11-01", 40.0), ("2026-11-02", 4.0)]
    assert list(zip(data["days"], chart, strict=True)) == expected
    assert shown == expected and exported == expected
    # a window of one UTC day (To not included) holds only that day's hours, in all three
    one = client.get("/usage/", {"start": "2026-11-02", "end": "2026-11-03", "group_by": "day"}).content.decode()
    assert chart_data(one)["days"] == ["2026-11-02"] and 'data-testid="usage-total-hours">4.0<' in one
