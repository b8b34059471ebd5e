"""Energy accounting benchmark (issue 18): ``console.power.energy`` over 2,048 nodes and 30 days.

A throwaway test database gets the designed 16,384-GPU rail-optimised fabric (2,048 DGX H100,
``inventory.import_inventory``) in 8 pools of 256 nodes, and 30 days of history: every third
node powered off each night (22:00 to 06:00 UTC: four power events a night) and, every day in
every pool, a released 10-hour reservation holding all 8 GPUs of 64 nodes (one allocation row
per GPU, as the reservation path writes them). Then it times, ``--repeat`` times each (median),
``energy()`` by pool, by day and by node over the 30 days, the usage page's ``daily_by_pool``
and the dashboard's last 24 h, and counts the queries of each.

Run: ``.venv/bin/python tests/benchmarks/bench_energy.py [--repeat N]`` (uses ``DATABASE_URL``
when set, creating and dropping a ``test_…`` database). Ends by printing ONE JSON line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402

django.setup()

from tests.benchmarks.benchutil import imported_fabric, load_average  # noqa: E402

DAYS = 30
POOLS = 8
BOOKED_PER_POOL = 64


def seed(now: dt.datetime) -> dict[str, float]:
    from console.power.models import PowerEvent
    from console.tenancy.context import Actor
    from console.tenancy.models import Principal, Role, Tenant
    from scheduling.models import GPU, Reservation, ReservationAllocation
    from scheduling.services import inventory

    actor, operator = Actor.system("bench"), Principal(None, Role.OPERATOR, None)
    t0 = time.perf_counter()
    fabric, nodes = imported_fabric("bench-energy", 16384)
    size = len(nodes) // POOLS
    pools = [
        inventory.create_pool(actor, operator, fabric=fabric, name=f"p{i}", nodes=nodes[i * size : (i + 1) * size])
        for i in range(POOLS)
    ]
    tenant = Tenant.objects.create(name="Bench", slug="bench")
    gpus_of: dict[int, list[int]] = {}
    for pk, node_id in GPU.objects.filter(node__fabric=fabric).values_list("pk", "node_id"):
        gpus_of.setdefault(node_id, []).append(pk)
    today = now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    events, allocations = [], []
    for back in range(DAYS, 0, -1):
        day = today - dt.timedelta(days=back)
        for node in nodes[::3]:
            for at, was, to in (
                (day + dt.timedelta(hours=22), "on", "powering-off"),
                (day + dt.timedelta(hours=22, minutes=2), "powering-off", "off"),
                (day + dt.timedelta(hours=30), "off", "powering-on"),
                (day + dt.timedelta(hours=30, minutes=7), "powering-on", "on"),
            ):
                events.append(PowerEvent(node=node, at=at, from_state=was, to_state=to, intended=True, actor="policy"))
        start, end = day + dt.timedelta(hours=9), day + dt.timedelta(hours=19)
        for i, pool in enumerate(pools):
            res = Reservation.objects.create(
                tenant=tenant, pool=pool, fabric=fabric, status="released", start=start, end=end, gpus=512
            )
            booked = [n for n in nodes[i * size : (i + 1) * size] if n.pk % 3][:BOOKED_PER_POOL]
            allocations += [
                ReservationAllocation(reservation=res, node=n, gpu_id=g, start=start, end=end)
                for n in booked
                for g in gpus_of[n.pk]
            ]
    PowerEvent.objects.bulk_create(events, batch_size=5000)
    ReservationAllocation.objects.bulk_create(allocations, batch_size=5000)
    return {
        "setup_s": round(time.perf_counter() - t0, 1),
        "nodes": len(nodes),
        "power_events": len(events),
        "allocation_rows": len(allocations),
    }


def timed(repeat: int, call: Callable[[], object]) -> tuple[float, int, object]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times, queries, result = [], 0, None
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            t0 = time.perf_counter()
            result = call()
            times.append(time.perf_counter() - t0)
        queries = len(captured.captured_queries)
    return round(statistics.median(times), 3), queries, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from django.test.utils import setup_databases, teardown_databases
    from django.utils import timezone

    from console.power.energy import EnergyQuery, daily_by_pool, energy

    old = setup_databases(verbosity=0, interactive=False)
    try:
        now = timezone.now()
        out: dict[str, object] = {"bench": "energy", "days": DAYS, **seed(now)}
        month = EnergyQuery.checked(now - dt.timedelta(days=DAYS), now)
        for name, call in (
            ("by_pool", lambda: energy(month, now=now)),
            ("by_day", lambda: energy(EnergyQuery(month.window_from, month.window_to, "day"), now=now)),
            ("by_node", lambda: energy(EnergyQuery(month.window_from, month.window_to, "node"), now=now)),
            ("usage_page_daily_by_pool", lambda: daily_by_pool(month, now=now)),
            ("dashboard_24h", lambda: energy(EnergyQuery.checked(now - dt.timedelta(hours=24), now), now=now)),
        ):
            seconds, queries, result = timed(args.repeat, call)
            out[f"{name}_s"], out[f"{name}_queries"] = seconds, queries
            print(f"{name}: {seconds} s, {queries} queries", file=sys.stderr)
            if name == "by_pool":
                out["saved_fraction_30d"] = result.total["saved_fraction"]  # type: ignore[attr-defined]
        out["load_average"] = load_average()
        print(json.dumps(out))
    finally:
        teardown_databases(old, verbosity=0)


if __name__ == "__main__":
    main()
