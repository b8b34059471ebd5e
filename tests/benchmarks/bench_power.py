"""Power-policy benchmark: energy saved against the added wait, on replayed traces (issue 18).

Each trace is replayed on the designed 2,048-GPU rail-optimised fabric (as ``bench_replay``:
``rail-optimized:gpus=2048``, 256 DGX-H100 nodes) with the topology policy, once without a power
policy (the baseline) and once per setting below; each row gives the energy used, the always-on
energy of the same schedule, the fraction saved, and the change in average and p95 wait against
the baseline. Node figures: the catalogue's DGX-H100 (10.2 kW busy, 1.8 kW idle, 45 W off,
420 s boot); booting is counted at the busy draw.

Traces: Kalos (all 319 jobs), Alibaba OpenB (all 7,064 GPU pods), synthetic
(``scheduling.replay.generator``, ``--jobs`` jobs, seed ``--seed``) at a light (0.3), a medium
(0.5) and a saturated (1.0) offered load.

Run: ``.venv/bin/python tests/benchmarks/bench_power.py [--jobs N] [--seed S] [--settings A;B]``.
Prints progress and a Markdown table, and ends with ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402

django.setup()

from designer.builtin_catalogue import default_catalogue  # noqa: E402
from designer.plan import plan  # noqa: E402
from scheduling.replay import (  # noqa: E402
    ReplayOptions,
    TraceJob,
    load_alibaba,
    load_kalos,
    parse_power_policy,
    simulate,
    wait_deltas,
)
from scheduling.replay.generator import TraceSpec, generate, offered_load  # noqa: E402
from scheduling.services.topology import topology_from_graph  # noqa: E402

TRACES = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces"
SETTINGS = (
    "idle=10m,buffer=0",
    "idle=30m,buffer=0",
    "idle=30m,buffer=2%",
    "idle=60m,buffer=5%",
    "idle=10m,buffer=5%",
)
LOADS = (("light", 0.3), ("medium", 0.5), ("saturated", 1.0))


def traces(jobs: int, seed: int) -> list[tuple[str, list[TraceJob]]]:
    real = [
        ("kalos", load_kalos(TRACES / "kalos_jobs.csv")),
        ("alibaba", load_alibaba(TRACES / "alibaba_openb_pods.csv")),
    ]
    synthetic = [
        (f"synthetic-{rho:g} ({label})", generate(TraceSpec(jobs=jobs, load=rho, seed=seed))) for label, rho in LOADS
    ]
    return real + synthetic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--settings", default=";".join(SETTINGS), help="power policies separated by ';'")
    parser.add_argument("--only", help="comma-separated trace name prefixes to run")
    args = parser.parse_args()
    settings = [s for s in args.settings.split(";") if s]
    node_type = default_catalogue().nodes["DGX-H100"]
    graph = plan({"topology": "rail-optimized", "gpus": 2048}).graph
    assert graph is not None
    topology = topology_from_graph(graph).topology
    began = time.perf_counter()
    load_1m = os.getloadavg()[0]
    results: dict[str, dict] = {}
    rows = []
    for name, jobs in traces(args.jobs, args.seed):
        if args.only and not any(name.startswith(p) for p in args.only.split(",")):
            continue
        t = time.perf_counter()
        base = simulate(jobs, topology, "topology").summary()
        entry: dict = {
            "jobs": len(jobs),
            "offered_load": round(offered_load(jobs, topology.total_gpus), 3),
            "baseline": {"avg_wait_s": round(base["avg_wait_s"], 1), "p95_wait_s": round(base["p95_wait_s"], 1)},
        }
        print(f"{name:26} baseline {time.perf_counter() - t:6.1f} s  {json.dumps(entry['baseline'])}", flush=True)
        for setting in settings:
            t = time.perf_counter()
            power = parse_power_policy(setting, node_type)
            result = simulate(jobs, topology, "topology", ReplayOptions(power=power)).summary()
            result |= wait_deltas(base, result)
            figures = {
                "energy_kwh": round(result["energy_kwh"], 1),
                "energy_kwh_always_on": round(result["energy_kwh_always_on"], 1),
                "energy_saved_fraction": round(result["energy_saved_fraction"], 4),
                "wait_delta_avg_s": round(result["wait_delta_avg_s"], 1),
                "wait_delta_p95_s": round(result["wait_delta_p95_s"], 1),
                "wait_delta_p95_fraction": (
                    None if result["wait_delta_p95_fraction"] is None else round(result["wait_delta_p95_fraction"], 4)
                ),
                "p95_wait_s": round(result["p95_wait_s"], 1),
                "power_on_actions": result["power_on_actions"],
                "power_off_actions": result["power_off_actions"],
                "seconds": round(time.perf_counter() - t, 1),
            }
            entry[setting] = figures
            print(f"{name:26} {setting:20} {figures['seconds']:6.1f} s  {json.dumps(figures)}", flush=True)
            rows.append(_row(name, entry, setting, figures))
        results[name] = entry
    print()
    print(
        "| trace (offered load) | policy | kWh | kWh always on | saved | Δ avg wait | p95 wait (baseline) | Δ p95 wait |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    print()
    print(
        json.dumps(
            {
                "bench": "power",
                "fabric_gpus": topology.total_gpus,
                "node_type": node_type.name,
                "synthetic_jobs": args.jobs,
                "seed": args.seed,
                "loadavg_1m_start": round(load_1m, 2),
                "loadavg_1m_end": round(os.getloadavg()[0], 2),
                "seconds": round(time.perf_counter() - began, 1),
                "traces": results,
            }
        )
    )


def _row(name: str, entry: dict, setting: str, r: dict) -> str:
    def minutes(seconds: float) -> str:
        return f"{seconds / 60:+,.1f} min" if seconds else "0"

    base_p95 = entry["baseline"]["p95_wait_s"]
    fraction = r["wait_delta_p95_fraction"]
    p95 = minutes(r["wait_delta_p95_s"]) + (f" ({fraction:+.1%})" if fraction is not None and fraction else "")
    return (
        f"| {name} ({entry['offered_load']:g}) | {setting} | {r['energy_kwh']:,.0f} | {r['energy_kwh_always_on']:,.0f} | "
        f"**{r['energy_saved_fraction']:.1%}** | {minutes(r['wait_delta_avg_s'])} | {base_p95 / 60:,.1f} min | {p95} |"
    )


if __name__ == "__main__":
    main()
