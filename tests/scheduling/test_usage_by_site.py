"""GET /api/usage/?group_by=site (JSON and CSV) and the usage page grouped by site.

The world (times UTC, window 1 Nov – 3 Nov 2026, training 2.50 / inference 2.00 per GPU-hour):

    site North: fabric ft16 (pool "all")
      n1  tenant A, 8 GPUs training, 1 Nov 10:00 – 14:00, released          → 32 GPU-h, 80.00
      n2  tenant B, 4 GPUs inference, borrowed, 1 Nov 20:00 – 2 Nov 02:00   → 24 GPU-h (all borrowed), 48.00
    site South: fabric ft-s (pool "south")
      s1  tenant A, 2 GPUs training, 2 Nov 08:00 – 2 Nov 11:30, released    → 7 GPU-h, 17.50
    no site: fabric ft-x (pool "loose") — a site of its own
      x1  tenant B, 1 GPU training, 2 Nov 00:00 – 2 Nov 05:00                → 5 GPU-h, 12.50
      x2  tenant B, 16 GPUs queued                                           → nothing
"""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest

from console.fabric.models import Site
from scheduling.models import Reservation
from tests.scheduling.conftest import make_fabric, make_pool

pytestmark = pytest.mark.django_db

URL = "/api/usage/"
WINDOW = {"from": "2026-11-01", "to": "2026-11-03", "group_by": "site"}
SMALL = {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"}


def t(day: int, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, tzinfo=dt.UTC)


def booked(tenant, pool, start, end, gpus, status="released", **kw) -> Reservation:
    return Reservation.objects.create(
        tenant=tenant, pool=pool, fabric=pool.fabric, start=start, end=end, gpus=gpus, status=status, **kw
    )


@pytest.fixture
def world(pool, tenant_a, tenant_b, settings):
    settings.CONSOLE_DEFAULT_GPU_HOUR_PRICES = {"training": "2.50", "inference": "2.00", "best-effort": "0"}
    settings.CONSOLE_CURRENCY = "EUR"
    north = Site.objects.create(name="North", slug="north")
    south = Site.objects.create(name="South", slug="south")
    pool.fabric.site = north
    pool.fabric.save()
    south_pool = make_pool(make_fabric("ft-s", SMALL, site=south), "south")
    loose_pool = make_pool(make_fabric("ft-x", SMALL), "loose")
    booked(tenant_a, pool, t(1, 10), t(1, 14), 8, ended_at=t(1, 14))
    booked(tenant_b, pool, t(1, 20), t(2, 2), 4, borrowed=True, priority_class="inference", ended_at=t(2, 2))
    booked(tenant_a, south_pool, t(2, 8), t(2, 11, 30), 2, ended_at=t(2, 11, 30))
    booked(tenant_b, loose_pool, t(2, 0), t(2, 5), 1, ended_at=t(2, 5))
    booked(tenant_b, loose_pool, t(2, 0), t(2, 5), 16, status="queued")


def test_operator_reads_gpu_hours_borrowed_hours_and_cost_per_site(world, operator, client_for):
    body = client_for(operator).get(URL, WINDOW).json()
    assert body["group_by"] == "site"
    by = {row["name"]: row for row in body["rows"]}
    assert set(by) == {"North", "South", "ft-x (fabric, no site)"}
    north, south, loose = by["North"], by["South"], by["ft-x (fabric, no site)"]
    assert (north["site"], south["site"], loose["site"]) == ("north", "south", None)
    assert (north["gpu_hours"], north["borrowed_gpu_hours"], north["cost"]) == (56.0, 24.0, "128.00")
    assert (south["gpu_hours"], south["borrowed_gpu_hours"], south["cost"]) == (7.0, 0.0, "17.50")
    assert (loose["gpu_hours"], loose["cost"], loose["reservations"]) == (5.0, "12.50", 1)
    assert north["reservations"] == 2 and north["guaranteed_utilisation"] is None
    assert (body["total"]["gpu_hours"], body["total"]["cost"]) == (68.0, "158.00")


def test_a_tenant_reads_only_its_own_hours_per_site(world, admin_a, client_for):
    rows = client_for(admin_a).get(URL, WINDOW).json()["rows"]
    assert {(r["site"], r["gpu_hours"]) for r in rows} == {("north", 32.0), ("south", 7.0)}


def test_csv_by_site_carries_the_site_column(world, operator, client_for):
    response = client_for(operator).get(URL, {**WINDOW, "format": "csv"})
    assert response.status_code == 200 and 'filename="usage-site-' in response["Content-Disposition"]
    lines = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {(line["site"], line["gpu_hours"]) for line in lines} == {("north", "56.0"), ("south", "7.0"), ("", "5.0")}


def test_the_usage_page_groups_by_site(world, operator, client):
    client.force_login(operator)
    page = client.get("/usage/", {"start": "2026-11-01", "end": "2026-11-03", "group_by": "site"})
    html = page.content.decode()
    assert page.status_code == 200
    assert '<option value="site" selected>Site</option>' in html
    assert "North" in html and "South" in html and "ft-x (fabric, no site)" in html
    exported = client.get("/usage/", {"start": "2026-11-01", "end": "2026-11-03", "group_by": "site", "_export": "csv"})
    assert "North" in exported.content.decode() and "56.000" in exported.content.decode()
