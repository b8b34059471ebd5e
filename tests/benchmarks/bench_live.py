"""Benchmark: 200 WebSocket clients across 2 tenants receiving 1 Hz live updates of the
2,048-GPU demo fabric (real lab, real collector, Redis channel layer, uvicorn), the collector as
it was (baseline) against the collector as it is, in the same run.

What it does (everything torn down at the end):
1. PostgreSQL database ``$DATABASE_URL`` (default ``ibconsole_bench``) migrated; the 8-SU
   ``superpod-2048`` design; its lab (OpenSM on ibsim, own workdir and socket); inventory; two
   tenants with a ready 8-node reservation each (scheduling's services).
2. MAD throughput of the helper on every measured port (PortCountersExtended + PortCounters +
   PortInfo each, 12,288 MADs): synchronous (one MAD in flight) against pipelined, alternated,
   median of ``--mad-reps``.
3. Collector cycle time for the whole fabric (4,096 links) with the traffic model on, median and
   p95 of 10 sweeps, for the baseline configuration (synchronous MADs, link state and error
   counters of every port every sweep: what the collector did before) and the current one
   (pipelined MADs, link state of each port every second sweep, per-port error counters only
   where a switch's AllPortSelect error sums moved); plus one perfquery-reader sweep.
4. uvicorn on a free port; 100 clients per tenant on ``/ws/live/tenant/<id>/`` (bearer tokens);
   for each configuration in turn (baseline first unless ``--no-baseline``) the collector sweeps
   at 1 Hz for ``--seconds`` with the jobs' rate alternating so every reservation link changes
   colour every sweep. Delivered fraction = messages received / (clients × messages the group's
   sequence advanced by); latency = receive time − the sweep's counter write time (``at``);
   cross-tenant = links received that belong to the other tenant; server CPU from /proc for the
   uvicorn process.
5. Chromium (Debian): the operator's live page; main-thread time of applying one update of every
   visible link (``window.__live.apply``), median of 5.

Run: ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/ibconsole_bench
REDIS_URL=redis://127.0.0.1:6379/9 .venv/bin/python tests/benchmarks/bench_live.py``
Prints one JSON line per phase and ONE summary JSON line at the end (the current configuration
under the historical keys, the baseline under ``baseline_*``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
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

from benchutil import cpu_seconds, free_port, load_average, pct  # noqa: E402
from django.core.management import call_command  # noqa: E402
from live_collectors import AlternatingCollector, OnTheSmHost, cycle_times, mad_throughput, perfquery_cycle  # noqa: E402

from console.fabric.lab.fabrics import start_lab, stop_lab  # noqa: E402
from console.telemetry.collector import CollectorOptions  # noqa: E402

OPTIONS = {"topology": "rail-optimized", "gpus": 2048, "node_type": "DGX-H100", "switch": "QM9700"}


def uvicorn_argv(port: int) -> list[str]:
    return [sys.executable, "-m", "uvicorn", "console.asgi:application", "--host", "127.0.0.1"] + [
        *("--port", str(port), "--lifespan", "off", "--log-level", "warning")
    ]


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
    _, revision = create_design(actor, Principal(None, Role.OPERATOR, None), name=f"bench-live-{uid}", options=OPTIONS)
    fabric, _ = start_lab(revision, name=f"bench-live-{uid}", actor=actor, workdir=workdir, socket_name=f"bl-{uid}")
    inventory.import_inventory(fabric)
    users, tenants, tokens = [], [], []
    user_model = get_user_model()
    for name in ("a", "b"):
        tenant = Tenant.objects.create(name=f"Bench {name} {uid}", slug=f"bench-{name}-{uid}")
        user = user_model.objects.create_user(f"bench-{name}-{uid}", password="pw-12345678")
        Membership.objects.create(user=user, role=Role.TENANT_ADMIN, tenant=tenant)
        ready_reservation(fabric, tenant, nodes=8)
        _, token = actions.issue_token(Actor.for_user(user), Principal.of(user), user=user, name="bench")
        users.append(user)
        tenants.append(tenant)
        tokens.append(token)
    op = user_model.objects.create_user(f"bench-op-{uid}", password="pw-12345678")
    Membership.objects.create(user=op, role=Role.OPERATOR)
    _, op.bench_token = actions.issue_token(Actor.for_user(op), Principal.of(op), user=op, name="bench")
    return fabric, tenants, tokens, op


#: The collector before issue 6's changes: one MAD in flight, every port's link state and
#: error counters every sweep, one read of the whole fabric and then every group's delta.
BASELINE = {"mad_mode": "sync", "state_every": 1, "error_sums": False, "read_chunk_switches": 0}
CURRENT: dict = {}  # the defaults


async def clients(port: int, subs, links_of, run_phases):
    """Connect every client (``subs``: (path, token, tenant id or None)), run the collector
    phases (in a thread), collect what arrived."""
    import websockets

    results = []
    stop = asyncio.Event()

    async def client(i: int, path: str, token: str, tenant: int | None):
        rec = {"tenant": tenant, "msgs": [], "ok": False}
        results.append(rec)
        other = set().union(*(v for k, v in links_of.items() if k != tenant)) if tenant else set()
        await asyncio.sleep(i * 0.01)
        async with websockets.connect(
            f"ws://127.0.0.1:{port}{path}",
            subprotocols=[f"bearer.{token}"],
            origin=f"http://127.0.0.1:{port}",
            max_size=2**22,
            open_timeout=30,
        ) as ws:
            while not stop.is_set():
                try:
                    raw = await asyncio.wait_for(ws.recv(), 0.5)
                except TimeoutError:
                    continue
                received = time.time()
                msg = json.loads(raw)
                if msg["type"] == "subscribed":
                    rec["ok"] = True
                elif msg["type"] == "link.delta":
                    rec["group"] = msg["group"]
                    cross = sum(1 for lk in msg["links"] if lk["id"] in other)
                    rec["msgs"].append((msg["seq"], (received - msg["at"]) * 1000, cross))

    tasks = [asyncio.create_task(client(i, *sub)) for i, sub in enumerate(subs)]
    deadline = time.monotonic() + 60
    while sum(r["ok"] for r in results) < len(tasks) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)
    phases = await asyncio.to_thread(run_phases)  # the windows open once every client subscribed
    await asyncio.sleep(2.0)  # let the last window's messages arrive
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return results, phases


def collector_child(fabric_id: int, config: dict) -> None:
    """The collector as in production: its own process, sweeping at 1 Hz until stdin closes;
    one JSON line per sweep."""
    from console.fabric.models import Fabric

    fabric = Fabric.objects.get(pk=fabric_id)
    # through the lab's agent, as on a real SM host; else reading the lab here
    kind = AlternatingCollector if config.pop("agent", False) else OnTheSmHost
    collector = kind(fabric, CollectorOptions(store_interval=10, **config))
    collector.setup()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    print(json.dumps({"ready": True}), flush=True)
    try:
        while not stop.is_set():
            started = time.monotonic()
            r = collector.sweep()
            print(
                json.dumps({"cycle_s": r.cycle_s, "read_s": r.read_s, "publish_s": r.publish_s, "mads": r.mads}),
                flush=True,
            )
            stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))
    finally:
        collector.close()


def live_phase(fabric, groups: list[str], config: dict, seconds: float, uvicorn_pid: int) -> dict:
    """Sweep at 1 Hz with ``config`` for ``seconds`` (collector in its own process); the groups'
    sequence windows and the collector's figures."""
    from console.broadcast import current_seq

    child = subprocess.Popen(
        [sys.executable, __file__, "--collector-child", str(fabric.pk), "--config", json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    reports: list[dict] = []

    def pump():
        for line in child.stdout:
            if line.startswith("{"):
                reports.append(json.loads(line))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while not reports and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(3.0)  # warm: baselines read, first deltas out

    def mark():
        return ({g: current_seq(g) for g in groups}, cpu_seconds(uvicorn_pid), time.monotonic(), len(reports))

    load0 = load_average()
    seq0, cpu0, wall0, n0 = mark()
    time.sleep(seconds)
    seq1, cpu1, wall1, n1 = mark()
    child.stdin.close()
    child.wait(30)
    reader.join(5)
    window = [r for r in reports[n0:n1] if "cycle_s" in r] or [r for r in reports if "cycle_s" in r]
    return {
        "seq": (seq0, seq1),
        "cpu": (cpu1 - cpu0) / (wall1 - wall0) * 100,
        "cycle_p50": statistics.median(r["cycle_s"] for r in window),
        "read_p50": statistics.median(r["read_s"] for r in window),
        "publish_p50": statistics.median(r["publish_s"] for r in window),
        "publish_p99": pct([r["publish_s"] for r in window], 99),
        "mads": statistics.median(r["mads"] for r in window),
        "load": round((load0 + load_average()) / 2, 2),
    }


def phase_figures(results, phase: dict, prefix: str = "") -> dict:
    seq0, seq1 = phase["seq"]
    figures = {}
    for kind, recs in (("", [r for r in results if r["tenant"]]), ("fabric_", [r for r in results if not r["tenant"]])):
        expected = received = cross = 0
        latencies = []
        for rec in recs:
            group = rec.get("group")
            if group is None:
                continue
            window = set(range(seq0[group] + 1, seq1[group] + 1))
            expected += len(window)
            got = [(s, lat, c) for s, lat, c in rec["msgs"] if s in window]
            received += len({s for s, _, _ in got})
            latencies += [lat for _, lat, _ in got]
            cross += sum(c for _, _, c in got)
        if not recs:
            continue
        figures.update(
            {
                f"{kind}messages_expected": expected,
                f"{kind}delivered_fraction": round(received / expected, 5) if expected else 0.0,
                f"{kind}p50_ms": round(pct(latencies, 50), 1),
                f"{kind}p99_ms": round(pct(latencies, 99), 1),
            }
        )
        if kind == "":
            figures["cross_tenant_deliveries"] = cross
    figures.update(
        {
            "server_cpu_percent": round(phase["cpu"], 1),
            "live_cycle_p50_s": round(phase["cycle_p50"], 3),
            "live_read_p50_s": round(phase["read_p50"], 3),
            "live_publish_p50_ms": round(phase["publish_p50"] * 1000, 1),
            "live_publish_p99_ms": round(phase["publish_p99"] * 1000, 1),
            "live_mads_per_sweep": round(phase["mads"]),
            "live_load_average": phase["load"],
        }
    )
    return figures


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
        page.wait_for_function("() => window.__live && window.__live.links.size > 1000", timeout=60_000)
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200, help="tenant clients (2 tenants)")
    parser.add_argument("--operators", type=int, default=10, help="operator clients on the fabric group (every link)")
    parser.add_argument("--seconds", type=float, default=30, help="length of each live window")
    parser.add_argument("--mad-reps", type=int, default=5, help="repetitions of the MAD test")
    parser.add_argument("--no-baseline", action="store_true", help="skip the baseline configuration's live window")
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium step")
    parser.add_argument(
        "--agent",
        action="store_true",
        help="one more live window: the collector reading through the lab's agent (issue 31)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with --agent: this many direct and agent windows, alternating (figures: medians; ratios: per pair)",
    )
    parser.add_argument(
        "--agents-shared",
        action="store_true",
        help="with --agent: the agent's socket on the live views' uvicorn (deployed: one of its own)",
    )
    parser.add_argument("--collector-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--config", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.collector_child:
        collector_child(args.collector_child, json.loads(args.config))
        return
    from console.broadcast import fabric_group, tenant_group

    workdir = Path(tempfile.mkdtemp(prefix="bench-live-"))
    load_start = load_average()
    fabric, tenants, tokens, op = setup(workdir / "lab")
    uvicorn = agents_server = None
    try:
        out = mad_throughput(fabric, args.mad_reps)
        print(json.dumps({"phase": "mad", **out}), flush=True)
        out.update(cycle_times(fabric, BASELINE, "baseline_"))
        out.update(cycle_times(fabric, CURRENT))
        out["collector_cycle_ratio"] = round(out["collector_cycle_p50_s"] / out["baseline_collector_cycle_p50_s"], 3)
        out["perfquery_reader_cycle_s"] = perfquery_cycle(fabric)
        print(json.dumps({"phase": "collector", **out}), flush=True)
        port = free_port()
        env = dict(os.environ, CONSOLE_DATA_DIR=str(workdir))
        uvicorn = subprocess.Popen(uvicorn_argv(port), cwd=ROOT, env=env, start_new_session=True)
        time.sleep(3)
        probe = OnTheSmHost(fabric, CollectorOptions(store_interval=1e9, lab_traffic=False))
        probe.setup()
        probe._refresh_jobs()
        links_of = {int(t): set(v) for t, v in probe.workload.tenant_links.items()}
        probe.close()
        per_tenant = args.clients // len(tenants)
        subs = [
            (f"/ws/live/tenant/{t.pk}/", tok, t.pk)
            for _ in range(per_tenant)
            for t, tok in zip(tenants, tokens, strict=True)
        ]
        subs += [(f"/ws/live/fabric/{fabric.pk}/", op.bench_token, None)] * args.operators
        groups = [tenant_group(t.pk) for t in tenants] + [fabric_group(fabric.pk)]
        configs = ([] if args.no_baseline else [("baseline_", BASELINE)]) + [("", CURRENT)]
        if args.agent:
            from console.fabric.lab.agent import start_lab_agent
            from console.fabric.models import FabricAgent
            from console.tenancy.context import Actor

            agent_port = port
            if not args.agents_shared:  # as deployed: the agents' sockets on a uvicorn of their own
                agent_port = free_port()
                agents_server = subprocess.Popen(uvicorn_argv(agent_port), cwd=ROOT, env=env, start_new_session=True)
                time.sleep(3)
            start_lab_agent(fabric, f"http://127.0.0.1:{agent_port}", actor=Actor.system("bench-live"))
            deadline = time.monotonic() + 60
            while not FabricAgent.objects.filter(fabric=fabric, name="lab", sm_state="MASTER").exists():
                assert time.monotonic() < deadline, "the lab's agent did not connect"
                time.sleep(0.2)
            configs.append(("agent_", {**CURRENT, "agent": True}))
            # the direct and agent windows alternate, so a drift of the machine's load falls on both
            configs += [c for _ in range(args.rounds - 1) for c in (("", CURRENT), configs[-1])]

        def run_phases():
            return [
                (prefix, live_phase(fabric, groups, config, args.seconds, uvicorn.pid)) for prefix, config in configs
            ]

        results, phases = asyncio.run(clients(port, subs, links_of, run_phases))
        summary = {
            "clients": sum(1 for r in results if r["tenant"]),
            "connected": sum(r["ok"] for r in results if r["tenant"]),
            "operator_clients": sum(1 for r in results if not r["tenant"]),
            "seconds": args.seconds,
        }
        windows: dict[str, list[dict]] = {}
        for prefix, phase in phases:
            figures = phase_figures(results, phase)
            print(json.dumps({"phase": f"live {prefix or 'current'}", **figures}), flush=True)
            windows.setdefault(prefix, []).append(figures)
        for prefix, rounds in windows.items():  # each figure: the median over its windows
            summary.update({f"{prefix}{k}": statistics.median(r[k] for r in rounds) for k in rounds[0]})
            summary[f"{prefix}cross_tenant_deliveries"] = sum(r.get("cross_tenant_deliveries", 0) for r in rounds)
        if args.agent:  # through the agent against the direct collector, window by window
            for key in ("p50_ms", "p99_ms", "fabric_p50_ms", "fabric_p99_ms", "live_publish_p50_ms"):
                ratios = [a[key] / d[key] for d, a in zip(windows[""], windows["agent_"], strict=True) if d[key]]
                if ratios:
                    summary[f"agent_{key[:-3]}_ratio"] = round(statistics.median(ratios), 3)
                    summary[f"agent_{key[:-3]}_ratios"] = [round(r, 3) for r in ratios]
        if not args.no_baseline:
            for key in ("p99_ms", "fabric_p99_ms"):
                if summary.get(f"baseline_{key}"):
                    summary[f"{key[:-3]}_ratio"] = round(summary[key] / summary[f"baseline_{key}"], 3)
        summary.update(out)
        if not args.no_browser:
            try:
                apply_ms, visible = browser_apply_ms(port, fabric, op)
                summary.update(browser_apply_all_links_ms=apply_ms, browser_links=visible)
            except Exception as exc:  # the other figures still stand
                summary["browser_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        summary.update(load_average_start=load_start, load_average_end=load_average())
        print(json.dumps(summary), flush=True)
    finally:
        for server in (uvicorn, agents_server):
            if server is not None and server.poll() is None:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(10)
        stop_lab(fabric)


if __name__ == "__main__":
    main()
