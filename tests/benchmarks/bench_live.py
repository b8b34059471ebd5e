"""Benchmark: 200 WebSocket clients across 2 tenants receiving 1 Hz live updates of the
2,048-GPU demo fabric (real lab, real collector, Redis channel layer, uvicorn).

What it does (everything torn down at the end):
1. PostgreSQL database ``$DATABASE_URL`` (default ``ibconsole_bench``) migrated; the 8-SU
   ``superpod-2048`` design; its lab (OpenSM on ibsim, own workdir and socket); inventory; two
   tenants with a ready 8-node reservation each (scheduling's services).
2. Collector cycle time for the whole fabric (4,096 links) with the MAD reader and the traffic
   model on: median and p95 of 10 sweeps; plus one perfquery-reader sweep for comparison.
3. uvicorn on a free port; 100 clients per tenant on ``/ws/live/tenant/<id>/`` (bearer tokens);
   the collector sweeps at 1 Hz for ``--seconds`` with the jobs' rate alternating so every
   reservation link changes colour every sweep. Delivered fraction = messages received / (clients
   × messages the group's sequence advanced by); latency = receive time − the sweep's counter
   write time; cross-tenant = links received that belong to the other tenant; server CPU from
   /proc for the uvicorn process.
4. Chromium (Debian): the operator's live page; main-thread time of applying one update of every
   visible link (``window.__live.apply``), median of 5.

Run: ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/ibconsole_bench
REDIS_URL=redis://127.0.0.1:6379/9 .venv/bin/python tests/benchmarks/bench_live.py``
Prints ONE JSON line at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/ibconsole_bench")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/9")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from console.fabric import labs  # noqa: E402
from console.telemetry.collector import CollectorOptions, FabricCollector  # noqa: E402
from console.telemetry.traffic import Job  # noqa: E402

OPTIONS = {"topology": "rail-optimized", "gpus": 2048, "node_type": "DGX-H100", "switch": "QM9700"}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def setup(workdir: Path):
    from django.contrib.auth import get_user_model

    from console.tenancy import actions
    from console.tenancy.context import Actor
    from console.tenancy.models import Membership, Principal, Role, Tenant
    from designer.services import create_design
    from scheduling.services import inventory
    from tests.live.helpers import ready_reservation

    call_command("migrate", verbosity=0)
    uid = uuid.uuid4().hex[:6]
    actor = Actor.system("bench")
    _, revision = create_design(actor, Principal(None, Role.OPERATOR, None),
                                name=f"bench-live-{uid}", options=OPTIONS)  # fmt: skip
    fabric, _ = labs.start_lab(revision, name=f"bench-live-{uid}", actor=actor,
                               workdir=workdir, socket_name=f"bl-{uid}")  # fmt: skip
    inventory.import_inventory(fabric)
    users, tenants, tokens = [], [], []
    user_model = get_user_model()
    for name in ("a", "b"):
        tenant = Tenant.objects.create(name=f"Bench {name} {uid}", slug=f"bench-{name}-{uid}")
        user = user_model.objects.create_user(f"bench-{name}-{uid}", password="pw-12345678")
        Membership.objects.create(user=user, role=Role.TENANT_ADMIN, tenant=tenant)
        ready_reservation(fabric, tenant, nodes=8)
        _, token = actions.issue_token(Actor.for_user(user), Principal.of(user), user=user,
                                       name="bench")  # fmt: skip
        users.append(user)
        tenants.append(tenant)
        tokens.append(token)
    op = user_model.objects.create_user(f"bench-op-{uid}", password="pw-12345678")
    Membership.objects.create(user=op, role=Role.OPERATOR)
    return fabric, tenants, tokens, op


class AlternatingCollector(FabricCollector):
    """Reservations' jobs alternate between 30 % and 90 % of line rate every sweep."""

    def sweep(self):
        if self.jobs:
            load = 0.3 if self.sweeps % 2 else 0.9
            self.jobs = [(r, Job(j.name, j.nodes, gbps=400 * load)) for r, j in self.jobs]
            self._recompute_load()
        return super().sweep()

    def _refresh_jobs(self):
        keep = {r.id: j for r, j in self.jobs if r is not None}
        super()._refresh_jobs()
        self.jobs = [(r, keep.get(r.id, j) if r else j) for r, j in self.jobs]


def cycle_times(fabric) -> dict:
    collector = AlternatingCollector(fabric, CollectorOptions(store_interval=1e9))
    collector.setup()
    times, reads, writes = [], [], []
    try:
        for _ in range(11):
            report = collector.sweep()
            times.append(report.cycle_s)
            reads.append(report.read_s)
            writes.append(report.write_s)
            time.sleep(0.2)
        links = report.links
    finally:
        collector.close()
    pq = FabricCollector(fabric, CollectorOptions(reader="perfquery", lab_traffic=False,
                                                  store_interval=1e9))  # fmt: skip
    pq.setup()
    pq.sweep()
    pq_s = pq.sweep().cycle_s
    pq.close()
    times, reads, writes = times[1:], reads[1:], writes[1:]
    return {"collector_links": links, "collector_cycle_p50_s": round(statistics.median(times), 3),
            "collector_cycle_p95_s": round(pct(times, 95), 3),
            "collector_read_p50_s": round(statistics.median(reads), 3),
            "collector_write_p50_s": round(statistics.median(writes), 3),
            "perfquery_reader_cycle_s": round(pq_s, 3)}  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def clients(port: int, tenants, tokens, links_of, per_tenant: int, seconds: float, mark):
    import websockets

    results = []
    stop = asyncio.Event()

    async def client(i: int, tenant, token: str):
        rec = {"tenant": tenant.pk, "seqs": set(), "lat": [], "cross": 0, "ok": False}
        results.append(rec)
        other = set().union(*(v for k, v in links_of.items() if k != tenant.pk))
        uri = f"ws://127.0.0.1:{port}/ws/live/tenant/{tenant.pk}/"
        await asyncio.sleep(i * 0.01)
        async with websockets.connect(uri, subprotocols=[f"bearer.{token}"],
                                      origin=f"http://127.0.0.1:{port}", max_size=2**22,
                                      open_timeout=30) as ws:  # fmt: skip
            while not stop.is_set():
                try:
                    raw = await asyncio.wait_for(ws.recv(), 0.5)
                except TimeoutError:
                    continue
                msg = json.loads(raw)
                if msg["type"] == "subscribed":
                    rec["ok"] = True
                elif msg["type"] == "link.delta":
                    rec["seqs"].add(msg["seq"])
                    rec["lat"].append((time.time() - msg["at"]) * 1000)
                    rec["cross"] += sum(1 for lk in msg["links"] if lk["id"] in other)

    tasks = [asyncio.create_task(client(i, t, tok)) for i in range(per_tenant)
             for t, tok in zip(tenants, tokens, strict=True)]  # fmt: skip
    deadline = time.monotonic() + 60
    while sum(r["ok"] for r in results) < len(tasks) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)
    mark("start")  # the window opens once every client is subscribed
    await asyncio.sleep(seconds)
    mark("end")
    await asyncio.sleep(2.0)  # let the window's last messages arrive
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return results


def browser_apply_ms(port: int, fabric, op) -> float:
    from playwright.sync_api import sync_playwright

    from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        url = f"http://127.0.0.1:{port}"
        page.goto(f"{url}/login/")
        page.get_by_label("Username").fill(op.username)
        page.get_by_label("Password").fill("pw-12345678")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{url}/")
        page.goto(f"{url}/fabrics/{fabric.pk}/live/")
        page.wait_for_function("() => window.__live && window.__live.links.size > 1000",
                               timeout=60_000)  # fmt: skip
        ms = page.evaluate("""() => {
            const live = window.__live; const out = [];
            for (let i = 0; i < 5; i++) {
              const all = [...live.links.values()].map(l => ({...l, bucket: (l.bucket + 1 + i) % 6}));
              out.push(live.apply(all));
            }
            return out;
        }""")
        count = page.evaluate("() => window.__live.links.size")
        browser.close()
    return round(statistics.median(ms), 2), count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-live-"))
    fabric, tenants, tokens, op = setup(workdir / "lab")
    uvicorn = None
    try:
        out = cycle_times(fabric)
        print(json.dumps({"phase": "collector", **out}), flush=True)
        port = free_port()
        env = dict(os.environ, CONSOLE_DATA_DIR=str(workdir))
        uvicorn = subprocess.Popen([sys.executable, "-m", "uvicorn", "console.asgi:application",
                                    "--host", "127.0.0.1", "--port", str(port), "--lifespan",
                                    "off", "--log-level", "warning"], cwd=ROOT, env=env,
                                   start_new_session=True)  # fmt: skip
        time.sleep(3)
        collector = AlternatingCollector(fabric, CollectorOptions(store_interval=10))
        collector.setup()
        collector.sweep()
        links_of = {int(t): set(v) for t, v in collector.tenant_links.items()}
        stop = threading.Event()

        def loop():
            while not stop.is_set():
                started = time.monotonic()
                collector.sweep()
                stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))

        from console.live.notify import tenant_group
        from console.telemetry.store import current_seq

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        marks: dict[str, tuple[dict[int, int], float, float]] = {}

        def mark(name: str) -> None:
            seqs = {t.pk: current_seq(tenant_group(t.pk)) for t in tenants}
            marks[name] = (seqs, cpu_seconds(uvicorn.pid), time.monotonic())

        results = asyncio.run(clients(port, tenants, tokens, links_of,
                                      args.clients // len(tenants), args.seconds, mark))  # fmt: skip
        (seq0, cpu0, wall0), (seq1, cpu1, wall1) = marks["start"], marks["end"]
        cpu = (cpu1 - cpu0) / (wall1 - wall0) * 100
        stop.set()
        thread.join(5)
        collector.close()
        expected = received = 0
        latencies = []
        for rec in results:
            window = set(range(seq0[rec["tenant"]] + 1, seq1[rec["tenant"]] + 1))
            expected += len(window)
            received += len(rec["seqs"] & window)
            latencies += rec["lat"]
        apply_ms, visible = browser_apply_ms(port, fabric, op)
        print(json.dumps({
            "clients": len(results), "connected": sum(r["ok"] for r in results),
            "seconds": args.seconds, "messages_expected": expected,
            "delivered_fraction": round(received / expected, 5) if expected else 0.0,
            "p50_ms": round(pct(latencies, 50), 1), "p99_ms": round(pct(latencies, 99), 1),
            "cross_tenant_deliveries": sum(r["cross"] for r in results),
            "server_cpu_percent": round(cpu, 1), **out,
            "browser_apply_all_links_ms": apply_ms, "browser_links": visible,
        }), flush=True)  # fmt: skip
    finally:
        if uvicorn is not None and uvicorn.poll() is None:
            os.killpg(uvicorn.pid, signal.SIGTERM)
            uvicorn.wait(10)
        labs.stop_lab(fabric)


if __name__ == "__main__":
    main()
