"""Benchmark: the tail of topology-aware placement against first-fit, over many seeded loads (issue 39).

Synthetic traces of ``scheduling.replay.generator`` on the designed 2,048-GPU rail-optimised
fabric (as ``bench_replay.py``): ``--jobs`` jobs (1,200), sizes 1 to 512 GPUs (the default mix
without its 1,024-GPU jobs: 256 is one whole SU, 512 two), lognormal durations (median 1 h,
σ 1.2), Poisson arrivals with mean gaps ``--gaps`` seconds (20, 30 and 60: saturated, heavy,
busy), seeds ``--seeds`` (1–30). Each trace is replayed by both policies twice:

* as the trace says (a job runs as long wherever it lands): utilisation while jobs wait (the
  issue's bound: no load more than 1 % below first-fit), over the busy period and over the
  arrival period, per seed topology / first-fit − 1, worst and median per load; leaves and
  spines per multi-node job (the bound: 25 % below first-fit's);
* with the communication model (``scheduling.replay.comm``: a job crossing the spines runs at
  65 % of its packed throughput, Fluidstack's 256-GPU figure): goodput, useful GPU-hours per
  hour, of both policies, while jobs wait and over the busy period, and the seeds where
  first-fit's is higher;
* the loads that were worst before the bounded-locality change are replayed by the suite
  (``tests/scheduling/test_replay_worst_loads.py``, ``WORST_BEFORE``).

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


def run(
    jobs_per_trace: int, seeds: list[int], gaps: list[float], diagnose_worst: int = 3, drain_longest_first: bool = False
) -> dict:
    """Replay every (gap, seed) load with both policies, plain and under the communication
    model; print one line per load and the table; return the summary (the JSON figures). With
    ``drain_longest_first`` the queue runs longest first once every job has arrived (both
    policies, :attr:`ReplayOptions.drain_longest_first`)."""
    graph = plan({"topology": "rail-optimized", "gpus": 2048}).graph
    assert graph is not None
    topology = topology_from_graph(graph).topology
    plain_options = ReplayOptions(drain_longest_first=drain_longest_first)
    comm = ReplayOptions(comm=comm_model_of(graph), drain_longest_first=drain_longest_first)
    began, load_1m = time.perf_counter(), os.getloadavg()[0]
    rows: list[dict] = []
    for gap in gaps:
        for seed in seeds:
            jobs = trace(jobs_per_trace, gap, seed)
            row: dict = {"gap_s": gap, "seed": seed}
            for policy in POLICIES:
                plain = simulate(jobs, topology, policy, plain_options).summary()
                modelled = simulate(jobs, topology, policy, comm).summary()
                row[policy] = {
                    "utilization_waiting": plain["utilization_waiting"],
                    "utilization": plain["utilization"],
                    "utilization_arrivals": plain["utilization_arrivals"],
                    "leaves": plain["avg_leaves_per_job"],
                    "spines": plain["avg_spines_per_job"],
                    "decision_ms_p99": plain["decision_ms_p99"],
                    "goodput_waiting": modelled["goodput_waiting"],
                    "goodput": modelled["goodput"],
                }
            t, f = row["topology"], row["first-fit"]
            for key in ("utilization_waiting", "utilization", "utilization_arrivals", "goodput_waiting", "goodput"):
                row[key] = t[key] / f[key] - 1
            rows.append(row)
            print(
                f"gap {gap:g} s seed {seed:2}: utilisation while waiting {100 * row['utilization_waiting']:+.2f} %"
                f" (busy period {100 * row['utilization']:+.2f} %), goodput while waiting "
                f"{t['goodput_waiting']:.4f} vs {f['goodput_waiting']:.4f} ({100 * row['goodput_waiting']:+.2f} %),"
                f" leaves {t['leaves']:.2f} vs {f['leaves']:.2f}",
                flush=True,
            )
    diagnoses = []
    for row in sorted(rows, key=lambda r: r["utilization"])[:diagnose_worst]:
        jobs = trace(jobs_per_trace, row["gap_s"], row["seed"])
        runs = [simulate(jobs, topology, policy, plain_options).records for policy in POLICIES]
        diagnoses.append({"gap_s": row["gap_s"], "seed": row["seed"], **diagnose(*runs)})
    summary: dict = {"bench": "replay_tail", "fabric_gpus": topology.total_gpus, "jobs": jobs_per_trace}
    summary["drain_longest_first"] = drain_longest_first
    summary |= {"seeds": f"{min(seeds)}-{max(seeds)}", "loads": {}, "busy_period_worst_seeds": diagnoses}
    print(
        "\n| mean gap | utilisation while jobs wait: worst / median | busy period: worst / median (loads below −1 %) "
        "| goodput while jobs wait, topology / first-fit (median; seeds first-fit higher) "
        "| goodput, busy period (median; seeds first-fit higher) | leaves per job | spines per job |"
    )
    print("|---|---|---|---|---|---|---|")
    for gap in gaps:
        of = [r for r in rows if r["gap_s"] == gap]
        figures = _figures(of)
        summary["loads"][f"{gap:g}"] = figures
        print(
            f"| {gap:g} s | {figures['util_waiting_diff_worst_pct']:+.2f} / {figures['util_waiting_diff_median_pct']:+.2f} % "
            f"| {figures['util_diff_worst_pct']:+.2f} / {figures['util_diff_median_pct']:+.2f} % ({figures['loads_below_1pct']}) "
            f"| {figures['goodput_waiting_median'][0]:.4f} / {figures['goodput_waiting_median'][1]:.4f} "
            f"({figures['seeds_first_fit_goodput_waiting_higher']}) "
            f"| {figures['goodput_median'][0]:.4f} / {figures['goodput_median'][1]:.4f} ({figures['seeds_first_fit_goodput_higher']}) "
            f"| {figures['leaves'][0]:.2f} / {figures['leaves'][1]:.2f} ({figures['leaves_diff_pct']:+.1f} %) "
            f"| {figures['spines'][0]:.2f} / {figures['spines'][1]:.2f} ({figures['spines_diff_pct']:+.1f} %) |"
        )
    for key in ("utilization_waiting", "utilization"):
        short = "util_waiting" if key == "utilization_waiting" else "util"
        summary[f"{short}_diff_worst_pct"] = round(100 * min(r[key] for r in rows), 2)
        summary[f"{short}_diff_median_pct"] = round(100 * statistics.median(r[key] for r in rows), 2)
    summary["seeds_first_fit_goodput_waiting_higher"] = sum(r["goodput_waiting"] < 0 for r in rows)
    summary["decision_ms_p99_max"] = round(max(r["topology"]["decision_ms_p99"] for r in rows), 3)
    summary["loadavg_1m_start"] = round(load_1m, 2)
    summary["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    summary["seconds"] = round(time.perf_counter() - began, 1)
    return summary


def _figures(rows: list[dict]) -> dict:
    def pct(key: str, how) -> float:
        return round(100 * how(r[key] for r in rows), 2)

    leaves = [statistics.mean(r[p]["leaves"] for r in rows) for p in POLICIES]
    spines = [statistics.mean(r[p]["spines"] for r in rows) for p in POLICIES]
    return {
        "util_waiting_diff_worst_pct": pct("utilization_waiting", min),
        "util_waiting_diff_median_pct": pct("utilization_waiting", statistics.median),
        "util_diff_worst_pct": pct("utilization", min),
        "util_diff_median_pct": pct("utilization", statistics.median),
        "loads_below_1pct": sum(r["utilization"] < -0.01 for r in rows),
        "util_arrivals_diff_worst_pct": pct("utilization_arrivals", min),
        "goodput_waiting_median": [
            round(statistics.median(r[p]["goodput_waiting"] for r in rows), 4) for p in POLICIES
        ],
        "seeds_first_fit_goodput_waiting_higher": sum(r["goodput_waiting"] < 0 for r in rows),
        "goodput_median": [round(statistics.median(r[p]["goodput"] for r in rows), 4) for p in POLICIES],
        "seeds_first_fit_goodput_higher": sum(r["goodput"] < 0 for r in rows),
        "leaves": [round(x, 2) for x in leaves],
        "spines": [round(x, 2) for x in spines],
        "leaves_diff_pct": round(100 * (leaves[0] / leaves[1] - 1), 1),
        "spines_diff_pct": round(100 * (spines[0] / spines[1] - 1), 1),
        "seeds": len(rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1200)
    parser.add_argument("--seeds", default="1-30")
    parser.add_argument("--gaps", default="20,30,60", help="mean seconds between arrivals, one load each")
    parser.add_argument("--diagnose", type=int, default=3, help="explain the N worst seeds (busy period)")
    parser.add_argument(
        "--drain-longest-first",
        action="store_true",
        help="once every job has arrived, run the queue longest first (both policies): the drain's order",
    )
    args = parser.parse_args()
    gaps = [float(g) for g in args.gaps.split(",")]
    summary = run(args.jobs, seeds_of(args.seeds), gaps, args.diagnose, args.drain_longest_first)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
