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

Then the seeded loads against first-fit (``bench_replay_tail.run``: ``--tail-seeds`` 1–30 × mean
gaps of 20, 30 and 60 s, 1,200 jobs up to 512 GPUs; issue 39): utilisation while jobs wait and
over the busy period, goodput, leaves and spines, worst and median per load; in the JSON line
under ``tail``.

``--seeds 1,2,3,4,5`` (with ``--loads 0.8,1.0``, ``--jobs 1000`` keeps it bounded) replays only the
synthetic traces, one per (load, seed), and reports per load and policy the mean over seeds (and
the min-max spread) of every figure, and on how many seeds topology reached first-fit's
utilisation and average wait, and the median over seeds of each policy's per-seed ratio to
first-fit (utilisation, average and p95 wait): one sample at a saturated load is too chaotic to
judge by. It also reports the mean wait by job size (under one node, one whole node, several
nodes): the packing figures count multi-node jobs only, so a policy's cost shows in the others.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
from scheduling.placement import PoolTopology  # noqa: E402
from scheduling.replay import (  # noqa: E402
    ReplayOptions,
    ReplayResult,
    TraceJob,
    load_alibaba,
    load_kalos,
    replay,
    simulate,
)
from scheduling.replay.generator import STANDARD_LOADS, TraceSpec, generate, offered_load  # noqa: E402
from scheduling.services.topology import topology_from_graph  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_replay_tail  # noqa: E402

TRACES = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces"
POLICIES = (("topology", "topology", 0.0), ("patience", "topology", None), ("first-fit", "first-fit", 0.0))
FIGURES = (
    "utilization",
    "utilization_arrivals",
    "avg_wait_s",
    "p95_wait_s",
    "avg_leaves_per_job",
    "avg_spines_per_job",
)
#: Mean wait by job size (multi-seed mode): under one node, one whole node, several nodes.
SIZE_WAITS = ("wait_sub_node_s", "wait_one_node_s", "wait_multi_node_s")
KEYS = FIGURES + SIZE_WAITS


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
    parser.add_argument("--seeds", help="comma-separated seeds: multi-seed table of the synthetic loads only")
    parser.add_argument("--loads", default="0.8,1.0", help="loads of the multi-seed table")
    parser.add_argument(
        "--tail-seeds", default="1-30", help="the seeded loads against first-fit (bench_replay_tail.py); 0: skip"
    )
    args = parser.parse_args()
    graph = plan({"topology": "rail-optimized", "gpus": 2048}).graph
    assert graph is not None
    topology = topology_from_graph(graph).topology
    if args.seeds:
        seeds = [int(s) for s in args.seeds.split(",")]
        loads = [float(x) for x in args.loads.split(",")]
        multi_seed(topology, args.jobs, seeds, loads, args.patience_min * 60)
        return
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
    if args.tail_seeds != "0":
        # issue 39's figures: ≥ 30 seeds × 3 loads, utilisation and goodput against first-fit
        summary["tail"] = bench_replay_tail.run(1200, bench_replay_tail.seeds_of(args.tail_seeds), [20.0, 30.0, 60.0])
        summary["seconds"] = round(time.perf_counter() - began, 1)
    print(json.dumps(summary))


def multi_seed(topology: PoolTopology, jobs: int, seeds: list[int], loads: list[float], patience_s: float) -> None:
    """Per load: mean (min-max) over ``seeds`` of every figure for each policy; seeds where
    topology reached first-fit's utilisation and average wait."""
    began = time.perf_counter()
    load_1m = os.getloadavg()[0]
    out: dict[str, dict] = {}
    lines = []
    for load in loads:
        per: dict[str, list[dict]] = {label: [] for label, _, _ in POLICIES}
        for seed in seeds:
            trace = generate(TraceSpec(jobs=jobs, load=load, seed=seed))
            for label, policy, max_wait in POLICIES:
                t = time.perf_counter()
                run = simulate(
                    trace, topology, policy, ReplayOptions(max_wait_s=patience_s if max_wait is None else 0.0)
                )
                result = run.summary()
                figures = {k: result[k] for k in FIGURES} | _waits_by_size(run, topology)
                per[label].append(figures)
                print(f"load {load:g} seed {seed} {label:9} {time.perf_counter() - t:6.1f} s  {figures}", flush=True)
        topo, ff = per["topology"], per["first-fit"]
        entry: dict = {label: {k: _spread([r[k] for r in runs]) for k in KEYS} for label, runs in per.items()}
        entry["seeds_topology_util_ge_first_fit"] = sum(
            t["utilization"] >= f["utilization"] - 1e-9 for t, f in zip(topo, ff, strict=True)
        )
        entry["seeds_topology_wait_le_first_fit"] = sum(
            t["avg_wait_s"] <= f["avg_wait_s"] + 1e-9 for t, f in zip(topo, ff, strict=True)
        )
        for label in per:
            # Per seed, policy / first-fit - 1; the median seed (the figure issue 16 is judged by).
            entry[label]["median_vs_first_fit_pct"] = {
                k: round(100 * statistics.median(_ratio(r[k], f[k]) for r, f in zip(per[label], ff, strict=True)), 2)
                for k in ("utilization", "avg_wait_s", "p95_wait_s")
            }
        out[f"{load:g}"] = entry
        for label in per:
            e = entry[label]
            m = e["median_vs_first_fit_pct"]
            lines.append(
                f"| {load:g} | {label} | {_fmt(e['utilization'], 4)} | {_fmt(e['utilization_arrivals'], 4)} | "
                f"{_fmt(e['avg_wait_s'], 1, 60)} | {_fmt(e['p95_wait_s'], 1, 60)} | "
                f"{e['avg_leaves_per_job']['mean']:.2f} | {e['avg_spines_per_job']['mean']:.2f} | "
                f"{m['utilization']:+.2f} / {m['avg_wait_s']:+.1f} / {m['p95_wait_s']:+.1f} % | "
                + " / ".join(f"{e[k]['mean'] / 60:.1f}" for k in SIZE_WAITS)
                + " |"
            )
        lines.append(
            f"| {load:g} | topology ≥ first-fit | util. {entry['seeds_topology_util_ge_first_fit']}/{len(seeds)} "
            f"| | avg wait {entry['seeds_topology_wait_le_first_fit']}/{len(seeds)} | | | | | |"
        )
    print()
    print(f"{jobs} jobs per trace, seeds {','.join(map(str, seeds))}: mean (min-max) over seeds; waits in minutes")
    print(
        "| load | policy | utilisation | util. while arriving | avg wait | p95 wait | leaves / job | spines / job "
        "| median seed vs first-fit: util. / avg / p95 wait | avg wait: under one node / one node / multi-node |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for line in lines:
        print(line)
    print()
    summary = {
        "bench": "replay_seeds",
        "jobs": jobs,
        "seeds": seeds,
        "patience_min": patience_s / 60,
        "loadavg_1m_start": round(load_1m, 2),
        "loadavg_1m_end": round(os.getloadavg()[0], 2),
        "seconds": round(time.perf_counter() - began, 1),
        "loads": out,
    }
    print(json.dumps(summary))


def _waits_by_size(run: ReplayResult, topology: PoolTopology) -> dict[str, float]:
    # Mean wait of the jobs under one node (shares), of one whole node and of several nodes: the
    # packing figures count multi-node jobs only, so the smaller jobs are where a policy's node
    # choice can cost wait without a packing gain.
    node_gpus = max(n.gpus for n in topology.nodes)
    classes: dict[str, list[float]] = {k: [] for k in SIZE_WAITS}
    for r in run.records:
        key = "wait_multi_node_s" if r.nodes > 1 else "wait_one_node_s"
        classes["wait_sub_node_s" if r.job.gpus < node_gpus else key].append(r.wait_s)
    return {k: sum(v) / len(v) if v else 0.0 for k, v in classes.items()}


def _ratio(value: float, base: float) -> float:
    return value / base - 1 if base else 0.0


def _spread(values: list[float]) -> dict[str, float]:
    return {"mean": round(sum(values) / len(values), 4), "min": round(min(values), 4), "max": round(max(values), 4)}


def _fmt(s: dict[str, float], digits: int, scale: float = 1.0) -> str:
    return f"{s['mean'] / scale:.{digits}f} ({s['min'] / scale:.{digits}f}–{s['max'] / scale:.{digits}f})"


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
