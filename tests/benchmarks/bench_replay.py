"""Replay benchmark: topology, topology with patience and first-fit, side by side (issue 16).

Traces, each replayed on the **designed** 2,048-GPU rail-optimised fabric (plan options
``rail-optimized:gpus=2048``, turned into the engine's topology by ``services.topology`` as
``manage.py schedule replay`` does: 8 SUs x 32 DGX nodes, 64 rail leaves, 32 spines):

* Kalos (InternLM/AcmeTrace, Hu et al., NSDI 2024, CC BY 4.0): all 319 jobs;
* Alibaba OpenB (alibaba/clusterdata cluster-trace-gpu-v2023, Weng et al., ATC 2023, CC BY 4.0):
  all 7,064 GPU pods (no pod spans nodes: no multi-node job, leaves and spines are n/a);
* synthetic traces of ``scheduling.replay.generator`` (default mix and durations, ``--jobs`` jobs,
  seed ``--seed``) at offered loads 0.3, 0.5, 0.8 and 1.0 of the 2,048 GPUs.

Policies: ``topology``, ``topology`` with patience (``max_wait`` ``--patience-min`` minutes, the
queue pass's packed-placement wait) and ``first-fit``. Figures per row: utilisation (busy
period to the last completion, and over the arrival period), average and p95 wait, leaves and
spines per multi-node job.

Run: ``.venv/bin/python tests/benchmarks/bench_replay.py [--jobs N] [--seed S] [--patience-min M]``.
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

from designer.plan import plan  # noqa: E402
from scheduling.replay import ReplayOptions, TraceJob, load_alibaba, load_kalos, replay  # noqa: E402
from scheduling.replay.generator import STANDARD_LOADS, TraceSpec, generate, offered_load  # noqa: E402
from scheduling.services.topology import topology_from_graph  # noqa: E402

TRACES = Path("/work/shared/traces")
POLICIES = (("topology", "topology", 0.0), ("patience", "topology", None), ("first-fit", "first-fit", 0.0))
FIGURES = (
    "utilization",
    "utilization_arrivals",
    "avg_wait_s",
    "p95_wait_s",
    "avg_leaves_per_job",
    "avg_spines_per_job",
)


def traces(jobs: int, seed: int) -> list[tuple[str, list[TraceJob]]]:
    out = [
        ("kalos", load_kalos(TRACES / "kalos_jobs.csv")),
        ("alibaba", load_alibaba(TRACES / "alibaba_openb_pods.csv")),
    ]
    for load in STANDARD_LOADS:
        out.append((f"synthetic-{load:g}", generate(TraceSpec(jobs=jobs, load=load, seed=seed))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--patience-min", type=float, default=30.0)
    args = parser.parse_args()
    graph = plan({"topology": "rail-optimized", "gpus": 2048}).graph
    assert graph is not None
    topology = topology_from_graph(graph).topology
    began = time.perf_counter()
    load_1m = os.getloadavg()[0]
    results: dict[str, dict] = {}
    rows = []
    for name, jobs in traces(args.jobs, args.seed):
        entry: dict = {"jobs": len(jobs), "offered_load": round(offered_load(jobs, topology.total_gpus), 3)}
        for label, policy, max_wait in POLICIES:
            wait_s = args.patience_min * 60 if max_wait is None else max_wait
            t = time.perf_counter()
            result = replay(jobs, topology, policy, ReplayOptions(max_wait_s=wait_s))
            seconds = time.perf_counter() - t
            entry[label] = {k: round(result[k], 4) for k in FIGURES} | {"multi_node": result["jobs"]["multi_node"]}
            entry[label]["seconds"] = round(seconds, 1)
            print(f"{name:14} {label:9} {seconds:6.1f} s  {json.dumps(entry[label])}", flush=True)
            rows.append(_row(name, entry["offered_load"], label, entry[label]))
        topo, ff = entry["topology"], entry["first-fit"]
        entry["topology_meets_first_fit"] = (
            topo["utilization"] >= ff["utilization"] - 1e-9
            and topo["avg_wait_s"] <= ff["avg_wait_s"] + 1e-9
            and topo["p95_wait_s"] <= ff["p95_wait_s"] + 1e-9
            and (topo["multi_node"] == 0 or topo["avg_leaves_per_job"] <= ff["avg_leaves_per_job"])
        )
        results[name] = entry
    print()
    print(
        "| trace (offered load) | policy | utilisation | util. while arriving | avg wait | p95 wait | leaves / job | spines / job |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    print()
    summary = {
        "bench": "replay",
        "fabric_gpus": topology.total_gpus,
        "synthetic_jobs": args.jobs,
        "seed": args.seed,
        "patience_min": args.patience_min,
        "loadavg_1m_start": round(load_1m, 2),
        "loadavg_1m_end": round(os.getloadavg()[0], 2),
        "seconds": round(time.perf_counter() - began, 1),
        "traces": results,
    }
    print(json.dumps(summary))


def _row(name: str, offered: float, label: str, r: dict) -> str:
    def minutes(seconds: float) -> str:
        return f"{seconds / 60:,.1f} min"

    multi = r["multi_node"] > 0
    leaves = f"{r['avg_leaves_per_job']:.2f}" if multi else "n/a"
    spines = f"{r['avg_spines_per_job']:.2f}" if multi else "n/a"
    return (
        f"| {name} ({offered:g}) | {label} | {r['utilization']:.4f} | {r['utilization_arrivals']:.4f} | "
        f"{minutes(r['avg_wait_s'])} | {minutes(r['p95_wait_s'])} | {leaves} | {spines} |"
    )


if __name__ == "__main__":
    main()
