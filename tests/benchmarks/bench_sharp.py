"""Benchmark of SHARP-aware placement (pure Python, no database).

A 16,384-GPU rail-optimised pool (64 SUs × 32 nodes × 8 GPUs, 8 pods of 8 SUs, cores joining
them) whose leaves serve 2 aggregation trees and spines and cores 64. It is filled with 4-node
SHARP jobs (half an SU's trees each) until one is refused, then churns: a random SHARP job is
released and a new 4-node SHARP request decided, N times. Timed: each SHARP decision, against a
plain 4-node decision on the same state in the same loop.

Run: ``.venv/bin/python tests/benchmarks/bench_sharp.py [--decisions N]``.
Ends by printing ONE JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scheduling.placement import Placement, PlacementEngine, Request, rail_optimized  # noqa: E402
from scheduling.placement.sharp import Sharp, SharpLedger, SharpTrees, capacity_of  # noqa: E402
from tests.benchmarks.benchutil import load_average, pct  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--decisions", type=int, default=500)
    args = parser.parse_args()
    rng = random.Random(19)
    topo = rail_optimized(64, 32, 8, 8, sus_per_pod=8)
    ledger = SharpLedger(capacity_of(topo, 2, 64, 64))
    engine = PlacementEngine(topo, guards=[SharpTrees(ledger)])
    sharp, plain = Request(nodes=4, constraints=(Sharp(),)), Request(nodes=4)
    held: list[str] = []
    while isinstance(engine.place(sharp, f"s{len(held)}", explain=False), Placement):
        held.append(f"s{len(held)}")
    filled = len(held)
    sharp_ms, plain_ms = [], []
    refused = 0
    for i in range(args.decisions):
        victim = held.pop(rng.randrange(len(held)))
        engine.release(victim)
        ledger.release(victim)
        t0 = time.perf_counter()
        engine.preview(plain, explain=False)
        plain_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        result = engine.place(sharp, f"n{i}", explain=False)
        sharp_ms.append((time.perf_counter() - t0) * 1000)
        if isinstance(result, Placement):
            held.append(f"n{i}")
        else:
            refused += 1
    print(
        json.dumps(
            {
                "bench": "sharp",
                "gpus": topo.total_gpus,
                "sharp_jobs_at_capacity": filled,
                "expected_capacity": 64 * 2,
                "decisions": args.decisions,
                "refused_after_release": refused,
                "sharp_ms_p50": round(pct(sharp_ms, 50), 3),
                "sharp_ms_p99": round(pct(sharp_ms, 99), 3),
                "plain_ms_p50": round(pct(plain_ms, 50), 3),
                "plain_ms_p99": round(pct(plain_ms, 99), 3),
                "load_average": load_average(),
            }
        )
    )


if __name__ == "__main__":
    main()
