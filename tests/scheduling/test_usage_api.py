"""GET /api/usage/ and /api/pools/<id>/prices/: figures per group, who sees whom, CSV, bad input.

The world (all times UTC, window 1 Nov – 3 Nov 2026, prices training 2.50 / inference 2.00):

    tenant A, pool "all" (guaranteed 16 GPUs)
      r1  8 GPUs training, released, 1 Nov 10:00 – 1 Nov 14:00          → 32 GPU-h, 80.00
      r2  4 GPUs inference, borrowed, preempted at 2 Nov 01:00
          (booked 1 Nov 23:00 – 2 Nov 23:00)                            → 8 GPU-h (4 on the 1st,
                                                                           4 on the 2nd), 16.00
      r3  64 GPUs queued                                                 → nothing
    tenant B, pool "all"
      r4  2 GPUs training, released, 31 Oct 22:00 – 1 Nov 02:00         → 4 GPU-h inside, 10.00
      r5  32 GPUs rejected                                               → nothing
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from console.tenancy.models import AuditEntry
from scheduling.models import GpuHourPrice, Reservation
from tests.scheduling.conftest import give_quota

pytestmark = pytest.mark.django_db

URL = "/api/usage/"
WINDOW = {"from": "2026-11-01", "to": "2026-11-03"}


def t(day: int, hour: int, month: int = 11) -> dt.datetime:
    return dt.datetime(2026, month, day, hour, tzinfo=dt.UTC)


def booked(tenant, pool, start, end, gpus, status, **kw) -> Reservation:
    return Reservation.objects.create(
        tenant=tenant, pool=pool, fabric=pool.fabric, start=start, end=end, gpus=gpus, status=status, **kw
    )


@pytest.fixture
def world(pool, tenant_a, tenant_b, settings):
    settings.CONSOLE_DEFAULT_GPU_HOUR_PRICES = {"training": "2.50", "inference": "2.00", "best-effort": "0"}
    settings.CONSOLE_CURRENCY = "EUR"
    give_quota(tenant_a, pool, 16, 16)
    give_quota(tenant_b, pool, 0, 8)
    r = {
        "r1": booked(tenant_a, pool, t(1, 10), t(1, 14), 8, "released", name="train-a", ended_at=t(1, 14)),
        "r2": booked(
            tenant_a,
            pool,
            t(1, 23),
            t(2, 23),
            4,
            "preempted",
            borrowed=True,
            priority_class="inference",
            ended_at=t(2, 1),
        ),
        "r3": booked(tenant_a, pool, t(1, 12), t(1, 20), 64, "queued"),
        "r4": booked(tenant_b, pool, t(31, 22, month=10), t(1, 2), 2, "released", ended_at=t(1, 2)),
        "r5": booked(tenant_b, pool, t(1, 12), t(1, 20), 32, "rejected"),
    }
    return r


def rows_by(body, key):
    return {row[key]: row for row in body["rows"]}


def test_operator_by_tenant_sees_every_tenant(world, operator, client_for, tenant_a, tenant_b):
    body = client_for(operator).get(URL, WINDOW).json()
    by = rows_by(body, "tenant")
    assert set(by) == {tenant_a.pk, tenant_b.pk}
    a, b = by[tenant_a.pk], by[tenant_b.pk]
    assert (a["name"], a["gpu_hours"], a["borrowed_gpu_hours"], a["cost"], a["preemptions"]) == (
        "Tenant A",
        40.0,
        8.0,
        "96.00",
        1,
    )
    # 32 non-borrowed GPU-h of 16 guaranteed GPUs × 48 h = 768 → 0.0417
    assert a["guaranteed_utilisation"] == pytest.approx(32 / 768, abs=1e-4)
    assert (b["gpu_hours"], b["cost"], b["currency"], b["guaranteed_utilisation"]) == (4.0, "10.00", "EUR", None)
    assert (body["total"]["gpu_hours"], body["total"]["cost"]) == (44.0, "106.00")


def test_tenant_sees_only_itself_and_never_names_the_other(world, admin_a, client_for, tenant_a, tenant_b):
    client = client_for(admin_a)
    for group_by in ("tenant", "pool", "reservation", "day"):
        response = client.get(URL, {**WINDOW, "group_by": group_by, "tenant": tenant_b.pk})
        assert response.status_code == 200
        assert "Tenant B" not in response.content.decode()
        assert response.json()["total"]["gpu_hours"] == 40.0  # A's only, whatever ?tenant= says
    by = rows_by(client.get(URL, {**WINDOW, "group_by": "reservation"}).json(), "reservation")
    assert set(by) == {world["r1"].pk, world["r2"].pk}  # not B's r4, not the queued r3


def test_group_by_pool_reservation_and_day(world, operator, client_for, pool):
    client = client_for(operator)
    by_pool = rows_by(client.get(URL, {**WINDOW, "group_by": "pool"}).json(), "pool")
    assert list(by_pool) == [pool.pk] and by_pool[pool.pk]["name"] == pool.name
    assert by_pool[pool.pk]["gpu_hours"] == 44.0

    by_res = rows_by(client.get(URL, {**WINDOW, "group_by": "reservation"}).json(), "reservation")
    assert {k: (v["gpu_hours"], v["cost"]) for k, v in by_res.items()} == {
        world["r1"].pk: (32.0, "80.00"),
        world["r2"].pk: (8.0, "16.00"),
        world["r4"].pk: (4.0, "10.00"),
    }
    assert by_res[world["r1"].pk]["name"] == "train-a" and by_res[world["r4"].pk]["tenant_name"] == "Tenant B"

    by_day = rows_by(client.get(URL, {**WINDOW, "group_by": "day"}).json(), "day")
    # 1 Nov: r1 32 + r2 4 (23:00–24:00) + r4 4 = 40; 2 Nov: r2 4 (00:00–01:00) and its preemption
    assert {k: (v["gpu_hours"], v["preemptions"]) for k, v in by_day.items()} == {
        "2026-11-01": (40.0, 0),
        "2026-11-02": (4.0, 1),
    }


def test_operator_narrows_to_one_tenant(world, auditor, client_for, tenant_b):
    body = client_for(auditor).get(URL, {**WINDOW, "tenant": tenant_b.pk}).json()
    assert [row["tenant"] for row in body["rows"]] == [tenant_b.pk]


def test_a_pool_price_changes_the_cost(world, operator, client_for, pool):
    GpuHourPrice.objects.create(pool=pool, priority_class="training", price=Decimal("3.00"))
    by_res = rows_by(client_for(operator).get(URL, {**WINDOW, "group_by": "reservation"}).json(), "reservation")
    assert by_res[world["r1"].pk]["cost"] == "96.00"  # 32 × 3.00
    assert by_res[world["r2"].pk]["cost"] == "16.00"  # inference keeps the default 2.00


def test_csv_by_format_and_by_accept(world, operator, client_for, tenant_a):
    client = client_for(operator)
    for response in (
        client.get(URL, {**WINDOW, "format": "csv"}),
        client.get(URL, WINDOW, HTTP_ACCEPT="text/csv"),
    ):
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
        assert "attachment" in response["Content-Disposition"]
        lines = list(csv.DictReader(io.StringIO(response.content.decode())))
        a = next(line for line in lines if line["tenant"] == str(tenant_a.pk))
        assert (a["name"], a["gpu_hours"], a["borrowed_gpu_hours"], a["cost"]) == ("Tenant A", "40.0", "8.0", "96.00")


@pytest.mark.parametrize(
    "params, field",
    [
        ({"from": "yesterday"}, "from"),
        ({"to": "2026-13-01"}, "to"),
        ({"from": "2026-11-03", "to": "2026-11-01"}, "to"),
        ({"from": "2024-01-01", "to": "2026-01-01"}, "from"),
        ({"group_by": "rack"}, "group_by"),
        ({"to": "0001-01-05"}, "to"),
        ({"to": "9999-12-31T23:00:00Z", "group_by": "day"}, "to"),
        ({"tenant": "99999999999"}, "tenant"),
    ],
)
def test_bad_input_is_a_clear_400(world, operator, client_for, params, field):
    response = client_for(operator).get(URL, params)
    assert response.status_code == 400
    assert field in response.json()["fields"]


def test_defaults_are_the_last_30_days_by_tenant(world, operator, client_for):
    body = client_for(operator).get(URL).json()
    start, end = dt.datetime.fromisoformat(body["window_from"]), dt.datetime.fromisoformat(body["window_to"])
    assert body["group_by"] == "tenant" and end - start == dt.timedelta(days=30)


def test_query_count_does_not_grow_with_rows(world, operator, client_for, pool, tenant_a):
    client = client_for(operator)
    client.get(URL, {**WINDOW, "group_by": "reservation"})  # warm
    with CaptureQueriesContext(connection) as small:
        client.get(URL, {**WINDOW, "group_by": "reservation"})
    for hour in range(12):
        booked(tenant_a, pool, t(2, hour), t(2, hour + 1), 1, "released", ended_at=t(2, hour + 1))
    with CaptureQueriesContext(connection) as large:
        body = client.get(URL, {**WINDOW, "group_by": "reservation"}).json()
    assert len(body["rows"]) == 15
    assert len(large.captured_queries) <= len(small.captured_queries)


def test_operator_sets_and_clears_a_pool_price_audited(world, operator, admin_a, client_for, pool):
    url = f"/api/pools/{pool.pk}/prices/"
    assert client_for(admin_a).put(url, {"prices": {"training": "1.00"}}, format="json").status_code == 403
    body = client_for(operator).put(url, {"prices": {"training": "3.1"}}, format="json").json()
    training = next(p for p in body["prices"] if p["priority_class"] == "training")
    assert (training["price"], training["default"], training["overridden"]) == ("3.1000", "2.5000", True)
    entry = AuditEntry.objects.filter(action="pool.prices").latest("pk")
    assert entry.after == {"prices": {"training": "3.1000"}}
    body = client_for(admin_a).get(url).json()  # tenants read prices (the preview shows cost)
    assert next(p for p in body["prices"] if p["priority_class"] == "training")["price"] == "3.1000"
    client_for(operator).put(url, {"prices": {"training": None}}, format="json")
    assert not GpuHourPrice.objects.filter(pool=pool).exists()
    bad = client_for(operator).put(url, {"prices": {"training": "-1"}}, format="json")
    assert bad.status_code == 400
