"""Benchmark: the tail of topology-aware placement against first-fit, over many seeded loads (issue 39).

Synthetic traces of ``scheduling.replay.generator`` on the designed 2,048-GPU rail-optimised
fabric (as ``bench_replay.py``): ``--jobs`` jobs (1,200), sizes 1 to 512 GPUs (the default mix
without its 1,024-GPU jobs: 256 is one whole SU, 512 two), lognormal durations (median 1 h,
σ 1.2), Poisson arrivals with mean gaps ``--gaps`` seconds (20, 30 and 60: saturated, heavy,
busy), seeds ``--seeds`` (1–30). Each trace is replayed by both policies twice:

* as the trace says (a job runs as long wherever it lands): utilisation over the busy period
  and over the arrival period, per seed topology / first-fit − 1, worst and median per load;
  leaves and spines per multi-node job;
* with the communication model (``scheduling.replay.comm``: a job crossing the spines runs at
  65 % of its packed throughput, Fluidstack's 256-GPU figure): goodput, useful GPU-hours per
  hour, of both policies.

For the ``--diagnose`` worst seeds it prints why (``scheduling.replay.tail.diagnose``): the last
job of each replay, the jobs topology started latest, the first start that differs.

Run: ``.venv/bin/python tests/benchmarks/bench_replay_tail.py [--seeds 1-30] [--gaps 20,30,60]``.
Ends with ONE JSON line.
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
from scheduling.replay import ReplayOptions, simulate  # noqa: E402
from scheduling.replay.comm import comm_model_of  # noqa: E402
from scheduling.replay.generator import DEFAULT_SIZE_MIX, TraceSpec, generate  # noqa: E402
from scheduling.replay.tail import diagnose  # noqa: E402
from scheduling.services.topology import topology_from_graph  # noqa: E402

MIX = tuple((gpus, weight) for gpus, weight in DEFAULT_SIZE_MIX if gpus <= 512)
POLICIES = ("topology", "first-fit")


def seeds_of(text: str) -> list[int]:
    """``1-30`` or ``1,4,9``."""
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(s) for s in text.split(",")]


def trace(jobs: int, gap: float, seed: int):
    return generate(TraceSpec(jobs=jobs, rate=1.0 / gap, size_mix=MIX, seed=seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1200)
    parser.add_argument("--seeds", default="1-30")
    parser.add_argument("--gaps", default="20,30,60", help="mean seconds between arrivals, one load each")
    parser.add_argument("--diagnose", type=int, default=3, help="explain the N worst seeds")
    args = parser.parse_args()
    graph = plan({"topology": "rail-optimized", "gpus": 2048}).graph
    assert graph is not None
    topology = topology_from_graph(graph).topology
    comm = ReplayOptions(comm=comm_model_of(graph))
    began, load_1m = time.perf_counter(), os.getloadavg()[0]
    rows: list[dict] = []
    for gap in [float(g) for g in args.gaps.split(",")]:
        for seed in seeds_of(args.seeds):
            jobs = trace(args.jobs, gap, seed)
            row: dict = {"gap_s": gap, "seed": seed}
            for policy in POLICIES:
                plain = simulate(jobs, topology, policy).summary()
                modelled = simulate(jobs, topology, policy, comm).summary()
                row[policy] = {
                    "utilization": plain["utilization"],
                    "utilization_arrivals": plain["utilization_arrivals"],
                    "leaves": plain["avg_leaves_per_job"],
                    "spines": plain["avg_spines_per_job"],
                    "goodput": modelled["goodput"],
                    "goodput_arrivals": modelled["goodput_arrivals"],
                }
            t, f = row["topology"], row["first-fit"]
            row["util_diff"] = t["utilization"] / f["utilization"] - 1
            row["util_arrivals_diff"] = t["utilization_arrivals"] / f["utilization_arrivals"] - 1
            row["goodput_diff"] = t["goodput"] / f["goodput"] - 1
            rows.append(row)
            print(
                f"gap {gap:g} s seed {seed:2}: utilisation {100 * row['util_diff']:+.2f} % "
                f"(while arriving {100 * row['util_arrivals_diff']:+.2f} %), goodput {t['goodput']:.4f} vs "
                f"{f['goodput']:.4f} ({100 * row['goodput_diff']:+.2f} %)",
                flush=True,
            )
    worst = sorted(rows, key=lambda r: r["util_diff"])[: args.diagnose]
    diagnoses = []
    for row in worst:
        jobs = trace(args.jobs, row["gap_s"], row["seed"])
        runs = [simulate(jobs, topology, policy).records for policy in POLICIES]
        diagnoses.append({"gap_s": row["gap_s"], "seed": row["seed"], **diagnose(*runs)})
    summary = {
        "bench": "replay_tail",
        "fabric_gpus": topology.total_gpus,
        "jobs": args.jobs,
        "seeds": args.seeds,
        "loads": {},
        "worst_seeds": diagnoses,
    }
    print(
        "\n| mean gap | utilisation vs first-fit: worst / median | while arriving: worst / median | goodput topology / first-fit (median) | seeds first-fit's goodput higher | leaves / spines per job, topology vs first-fit |"
    )
    print("|---|---|---|---|---|---|")
    for gap in sorted({r["gap_s"] for r in rows}):
        of = [r for r in rows if r["gap_s"] == gap]
        figures = {
            "util_diff_worst_pct": round(100 * min(r["util_diff"] for r in of), 2),
            "util_diff_median_pct": round(100 * statistics.median(r["util_diff"] for r in of), 2),
            "util_arrivals_diff_worst_pct": round(100 * min(r["util_arrivals_diff"] for r in of), 2),
            "util_arrivals_diff_median_pct": round(100 * statistics.median(r["util_arrivals_diff"] for r in of), 2),
            "goodput_topology_median": round(statistics.median(r["topology"]["goodput"] for r in of), 4),
            "goodput_first_fit_median": round(statistics.median(r["first-fit"]["goodput"] for r in of), 4),
            "seeds_first_fit_goodput_higher": sum(r["goodput_diff"] < 0 for r in of),
            "goodput_arrivals_median": [
                round(statistics.median(r[p]["goodput_arrivals"] for r in of), 4) for p in POLICIES
            ],
            "seeds_first_fit_goodput_arrivals_higher": sum(
                r["first-fit"]["goodput_arrivals"] > r["topology"]["goodput_arrivals"] for r in of
            ),
            "leaves": [round(statistics.mean(r[p]["leaves"] for r in of), 2) for p in POLICIES],
            "spines": [round(statistics.mean(r[p]["spines"] for r in of), 2) for p in POLICIES],
            "seeds": len(of),
        }
        summary["loads"][f"{gap:g}"] = figures
        print(
            f"| {gap:g} s | {figures['util_diff_worst_pct']:+.2f} / {figures['util_diff_median_pct']:+.2f} % | "
            f"{figures['util_arrivals_diff_worst_pct']:+.2f} / {figures['util_arrivals_diff_median_pct']:+.2f} % | "
            f"{figures['goodput_topology_median']:.4f} / {figures['goodput_first_fit_median']:.4f} | "
            f"{figures['seeds_first_fit_goodput_higher']} of {len(of)} | "
            f"{figures['leaves'][0]:.2f} vs {figures['leaves'][1]:.2f} / {figures['spines'][0]:.2f} vs {figures['spines'][1]:.2f} |"
        )
    summary["util_diff_worst_pct"] = round(100 * min(r["util_diff"] for r in rows), 2)
    summary["util_diff_median_pct"] = round(100 * statistics.median(r["util_diff"] for r in rows), 2)
    summary["loadavg_1m_start"] = round(load_1m, 2)
    summary["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    summary["seconds"] = round(time.perf_counter() - began, 1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
