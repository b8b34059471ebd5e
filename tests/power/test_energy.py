"""Energy accounting (``GET /api/energy/``, ``/metrics``): a hand-written power history and
bookings, with the kWh worked out here by hand from the DGX-H100 catalogue figures (busy
10,200 W, idle 1,800 W, off 45 W), never by the code under test."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from django.utils import timezone

from console.power.models import PowerEvent
from console.telemetry.metrics import metrics_text
from scheduling.models import GPU, Node, Pool, Reservation, ReservationAllocation
from tests.live.prometheus_fixtures import promtool
from tests.scheduling.conftest import make_fabric, make_pool

pytestmark = pytest.mark.django_db

BUSY, IDLE, OFF = 10_200.0, 1_800.0, 45.0  # watts, the built-in catalogue's DGX-H100
UTC = dt.UTC


def t(day: int, hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 1, day, hour, minute, tzinfo=UTC)


def kwh(watts: float, hours: float) -> float:
    return watts * hours / 1000


@pytest.fixture
def world(db, tenant_a):
    fabric = make_fabric("energy", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    n1, n2 = Node.objects.filter(fabric=fabric).order_by("name")
    Pool.objects.filter(fabric=fabric).delete()
    pool_a, pool_b = make_pool(fabric, "alpha", [n1]), make_pool(fabric, "beta", [n2])
    return {"fabric": fabric, "n1": n1, "n2": n2, "a": pool_a, "b": pool_b, "tenant": tenant_a}


def event(node, at, from_state, to_state):
    PowerEvent.objects.create(node=node, at=at, from_state=from_state, to_state=to_state, intended=True, actor="t")


def booking(world, node, start, end, gpus, status="released"):
    res = Reservation.objects.create(
        tenant=world["tenant"],
        pool=world["a"],
        fabric=world["fabric"],
        status=status,
        start=start,
        end=end,
        gpus=gpus,
    )
    for gpu in GPU.objects.filter(node=node).order_by("index")[:gpus]:
        ReservationAllocation.objects.create(reservation=res, node=node, gpu=gpu, start=start, end=end)


@pytest.fixture
def history(world):
    """Window 2026-01-01 20:00 to 2026-01-02 04:00 UTC (crosses midnight).

    n1 (alpha): on since 10:00; 4 of 8 GPUs booked 21:00-23:00; powering off 23:30, off 23:35;
    powering on 02:00, on 02:10. A cancelled request's booking at 03:00 never counts.
    n2 (beta): off from before the window until 5 January (its only event, after the window,
    says what it was); an 8-GPU booking 01:00-03:00 while off counts as off (the node draws
    what its power state says).
    """
    n1, n2 = world["n1"], world["n2"]
    event(n1, t(1, 10), "off", "on")
    booking(world, n1, t(1, 21), t(1, 23), 4)
    event(n1, t(1, 23, 30), "on", "powering-off")
    event(n1, t(1, 23, 35), "powering-off", "off")
    event(n1, t(2, 2), "off", "powering-on")
    event(n1, t(2, 2, 10), "powering-on", "on")
    booking(world, n1, t(2, 3), t(2, 4), 8, status="cancelled")
    event(n2, t(5, 0), "off", "on")
    booking(world, n2, t(2, 1), t(2, 3), 8)
    half_busy = IDLE + 0.5 * (BUSY - IDLE)
    n1_day1 = kwh(IDLE, 1) + kwh(half_busy, 2) + kwh(IDLE, 35 / 60) + kwh(OFF, 25 / 60)
    n1_day1_always = kwh(IDLE, 2) + kwh(half_busy, 2)
    n1_day2 = kwh(OFF, 2) + kwh(BUSY, 10 / 60) + kwh(IDLE, 110 / 60)
    n1_day2_always = kwh(IDLE, 4)
    n2_day = kwh(OFF, 4)
    n2_day_always = kwh(IDLE, 4)
    return {
        "alpha": (n1_day1 + n1_day2, n1_day1_always + n1_day2_always),
        "beta": (2 * n2_day, 2 * n2_day_always),
        "2026-01-01": (n1_day1 + n2_day, n1_day1_always + n2_day_always),
        "2026-01-02": (n1_day2 + n2_day, n1_day2_always + n2_day_always),
        "total": (n1_day1 + n1_day2 + 2 * n2_day, n1_day1_always + n1_day2_always + 2 * n2_day_always),
    }


WINDOW = {"from": "2026-01-01T20:00:00Z", "to": "2026-01-02T04:00:00Z"}


def check(row, expected):
    used, always = expected
    assert row["kwh"] == pytest.approx(used, abs=1e-3)
    assert row["kwh_always_on"] == pytest.approx(always, abs=1e-3)
    assert row["saved_fraction"] == pytest.approx(1 - used / always, abs=1e-4)


def test_energy_by_pool(world, history, operator, client_for):
    reply = client_for(operator).get("/api/energy/", WINDOW)
    assert reply.status_code == 200, reply.content
    body = reply.json()
    assert body["group_by"] == "pool" and body["nodes"] == 2 and body["nodes_without_figures"] == 0
    rows = {r["name"]: r for r in body["rows"]}
    assert set(rows) == {"alpha", "beta"}
    assert rows["alpha"]["pool"] == world["a"].pk and rows["alpha"]["fabric"] == "energy"
    check(rows["alpha"], history["alpha"])
    check(rows["beta"], history["beta"])
    check(body["total"], history["total"])
    # the figures by hand: alpha drew 19.959 kWh of 22.8 always-on (12.5 % saved)
    assert rows["alpha"]["kwh"] == pytest.approx(19.959, abs=1e-3)
    assert rows["alpha"]["saved_fraction"] == pytest.approx(0.1246, abs=1e-4)


def test_energy_by_day_splits_at_utc_midnight(world, history, auditor, client_for):
    reply = client_for(auditor).get("/api/energy/", {**WINDOW, "group_by": "day"})
    assert reply.status_code == 200, reply.content
    body = reply.json()
    assert [r["day"] for r in body["rows"]] == ["2026-01-01", "2026-01-02"]
    for row in body["rows"]:
        check(row, history[row["day"]])
    check(body["total"], history["total"])


def test_a_node_in_two_pools_counts_in_both_and_once_in_the_total(world, history, operator, client_for):
    both = make_pool(world["fabric"], "both", [world["n1"], world["n2"]])
    body = client_for(operator).get("/api/energy/", WINDOW).json()
    rows = {r["name"]: r for r in body["rows"]}
    assert rows["both"]["pool"] == both.pk
    check(rows["both"], history["total"])
    check(body["total"], history["total"])


def test_energy_by_node_and_csv(world, history, operator, client_for):
    client = client_for(operator)
    body = client.get("/api/energy/", {**WINDOW, "group_by": "node"}).json()
    assert [r["node"] for r in body["rows"]] == [world["n1"].pk, world["n2"].pk]
    check(body["rows"][0], history["alpha"])
    reply = client.get("/api/energy/", {**WINDOW, "format": "csv"})
    assert reply.status_code == 200 and reply["Content-Type"].startswith("text/csv")
    assert 'filename="energy-pool-20260101.csv"' in reply["Content-Disposition"]
    lines = list(csv.DictReader(io.StringIO(reply.content.decode())))
    assert [line["name"] for line in lines] == ["alpha", "beta"]
    assert float(lines[1]["kwh"]) == pytest.approx(history["beta"][0], abs=1e-3)
    assert set(lines[0]) == {"pool", "name", "fabric", "kwh", "kwh_always_on", "saved_fraction"}


def test_only_operators_and_auditors_read_energy(world, admin_a, member_a, client_for):
    for user in (admin_a, member_a):
        reply = client_for(user).get("/api/energy/", WINDOW)
        assert reply.status_code == 403 and reply.json()["code"] == "permission_denied"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"from": "2026-01-03", "to": "2026-01-02"}, "to"),
        ({"from": "2026-01-02", "to": "2026-01-02"}, "to"),
        ({"group_by": "tenant"}, "group_by"),
        ({"from": "2024-01-01", "to": "2025-01-02"}, "from"),
        ({"from": "yesterday"}, "from"),
    ],
)
def test_bad_parameters_are_400s(world, operator, client_for, params, field):
    reply = client_for(operator).get("/api/energy/", params)
    assert reply.status_code == 400, reply.content
    assert field in reply.json()["fields"]


def test_default_window_is_the_last_seven_days_by_pool(world, operator, client_for):
    before = timezone.now()
    body = client_for(operator).get("/api/energy/").json()
    after = timezone.now()
    to = dt.datetime.fromisoformat(body["window_to"])
    assert before <= to <= after and to - dt.datetime.fromisoformat(body["window_from"]) == dt.timedelta(days=7)
    assert body["group_by"] == "pool"
    # no event at all: both nodes on (the Node row's state) and idle all week, nothing saved
    week_idle = kwh(IDLE, 24 * 7)
    check(body["total"], (2 * week_idle, 2 * week_idle))


def recent(world):
    """n1 off until two days ago, then on, and off again for the last 9 hours; n2 on and idle
    throughout. The last 24 hours per pool."""
    now = timezone.now()
    event(world["n1"], now - dt.timedelta(days=2), "off", "on")
    event(world["n1"], now - dt.timedelta(hours=9), "on", "off")
    Node.objects.filter(pk=world["n1"].pk).update(power_state="off")
    return {"alpha": (kwh(IDLE, 15) + kwh(OFF, 9), kwh(IDLE, 24)), "beta": (kwh(IDLE, 24), kwh(IDLE, 24))}


def _sample(body: str, name: str, pool: str) -> float:
    prefix = f'{name}{{fabric="energy",pool="{pool}"}} '
    (line,) = [line for line in body.splitlines() if line.startswith(prefix)]
    return float(line[len(prefix) :])


def test_metrics_give_each_pools_last_24_hours_in_joules(world):
    expected = recent(world)
    body = metrics_text()
    result = promtool("check", "metrics", stdin=body)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")
    for pool, (used, always) in expected.items():
        # Wh resolution (the report's kWh to three decimals), and the milliseconds between
        # here and the scrape
        assert _sample(body, "ibc_pool_energy_24h_joules", pool) == pytest.approx(used * 3.6e6, abs=4000)
        assert _sample(body, "ibc_pool_energy_always_on_24h_joules", pool) == pytest.approx(always * 3.6e6, abs=4000)
