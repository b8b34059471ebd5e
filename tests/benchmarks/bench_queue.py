"""Benchmark of one queue pass (:func:`scheduling.placement.queue.queue_pass`, the pass both the
console's queue and ``schedule replay`` run) over 500 queued requests on the fragmented
16,384-GPU pool of ``bench_placement_core`` (64 SUs in 8 pods, ~50 % of nodes busy at random,
~3 % with a booking starting in 30 min).

The queue: 500 requests of 8 to 1,024 GPUs (sizes as in the Kalos trace's mix: mostly one node,
a tail of large gangs), 1 to 8 hours, in random order. The first ones fill the free capacity; the
rest each get an estimated start (one earliest-window search per request, backfilled around the
requests ahead of it: the head by the engine's earliest-window search, the others from the
pool's free-from profile). Every repetition starts from a fresh copy of the pool state, so each
pass sees the same state; the topology (and its cached eligibility) is shared, as in the console. Timed: the pass alone (the same
parameters as the console's service pass: EASY backfill, estimates from the free-from profile).
``bench_scheduling`` times the service pass (locks, cached snapshot, pass, writes) on its pool.

Run: ``.venv/bin/python tests/benchmarks/bench_queue.py [--repeat N] [--depth N]``.
Prints ONE JSON line with the median; target under 100 ms.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scheduling.placement import Owner, PlacementEngine, Request  # noqa: E402 - path set up above for direct runs
from scheduling.placement.queue import QueuedJob, queue_pass  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_placement_core import HOUR, fragmented_pool  # noqa: E402

SIZES = (8, 8, 8, 8, 16, 16, 32, 64, 128, 256, 512, 1024)
TARGET_MS = 100.0


def queued_jobs(count: int, seed: int) -> list[QueuedJob]:
    rng = random.Random(seed)
    jobs = []
    for i in range(count):
        gpus = rng.choice(SIZES)
        owner = Owner(f"t{i % 8}")
        jobs.append(QueuedJob(f"q{i}", Request(gpus=gpus, owner=owner), rng.uniform(1, 8) * HOUR, 0.0, 0.0, gpus))
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    jobs = queued_jobs(args.requests, args.seed)
    times, cpu, placed, estimated = [], [], 0, 0
    pristine, _rng = fragmented_pool(args.seed)
    topology = pristine.topology
    for k in range(args.repeat + 1):
        # A fresh copy of the same state on the same topology (the console caches a pool's
        # topology and its derived eligibility across passes); the first pass only warms that.
        engine = PlacementEngine(topology, state=copy.deepcopy(pristine.state, {id(topology): topology}))
        began, began_cpu = time.perf_counter(), time.process_time()
        decisions = queue_pass(engine, jobs, reservations=1, estimate=True)
        if k == 0:
            continue
        times.append((time.perf_counter() - began) * 1000)
        cpu.append((time.process_time() - began_cpu) * 1000)
        placed = sum(d.placed_now for d in decisions)
        estimated = sum(d.estimated_start is not None for d in decisions)
    median = statistics.median(times)
    result = {
        "bench": "queue_pass",
        "pool_gpus": 16384,
        "queued": args.requests,
        "placed_now": placed,
        "estimated": estimated,
        "repeat": args.repeat,
        "pass_ms_median": round(median, 1),
        "pass_ms_max": round(max(times), 1),
        # CPU time of the process: less sensitive than wall time to the other load of a shared host
        "pass_cpu_ms_median": round(statistics.median(cpu), 1),
        "target_ms": TARGET_MS,
        "met": median < TARGET_MS,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
