"""Trace replay through the real engine: queueing semantics and the topology-vs-first-fit result."""

from __future__ import annotations

import pytest

from scheduling.placement import rail_optimized
from scheduling.replay import RESULT_KEYS, TraceJob, load_kalos, replay, simulate
from tests.datafiles import TRACES

KALOS = TRACES / "kalos_jobs.csv"


def test_fifo_with_easy_backfill_never_delays_the_head():
    # One SU of 4 nodes (32 GPUs).
    #   a: 3 nodes for 100 s from t=0        -> starts 0
    #   b: 4 nodes, arrives t=1              -> head, reserved at 100
    #   c: 1 node for 50 s, arrives t=2      -> backfilled now (ends 52 < 100)
    #   d: 1 node for 200 s, arrives t=3     -> would delay b: waits until b ends at 110
    jobs = [
        TraceJob("a", 0, 100, 24),
        TraceJob("b", 1, 10, 32),
        TraceJob("c", 2, 50, 8),
        TraceJob("d", 3, 200, 8),
    ]

    result = simulate(jobs, rail_optimized(1, nodes_per_su=4), "topology")

    starts = {r.job.job_id: r.start for r in result.records}
    assert starts == {"a": 0, "b": 100, "c": 2, "d": 110}
    summary = result.summary()
    assert summary["avg_wait_s"] == pytest.approx((0 + 99 + 0 + 107) / 4)
    assert summary["jobs"]["multi_node"] == 2


def test_result_has_exactly_the_public_keys_and_counts_jobs_too_large():
    jobs = [TraceJob("small", 0, 10, 8), TraceJob("huge", 0, 10, 4096)]

    result = replay(jobs, rail_optimized(1), "first-fit")

    assert tuple(result) == RESULT_KEYS
    assert result["jobs"] == {"submitted": 2, "placed": 1, "skipped_too_large": 1, "multi_node": 0}


def test_utilization_is_busy_gpu_seconds_over_the_busy_period():
    # 2 nodes (16 GPUs); one 8-GPU job for 10 s then idle 10 s, another 8-GPU job for 10 s.
    jobs = [TraceJob("a", 0, 10, 8), TraceJob("b", 20, 10, 8)]

    result = replay(jobs, rail_optimized(1, nodes_per_su=2), "topology")

    assert result["utilization"] == pytest.approx(160 / (16 * 30))
    assert result["avg_jct_s"] == 10


def test_kalos_topology_spans_fewer_leaves_and_spines_than_first_fit_on_2048_gpus():
    jobs = load_kalos(KALOS)
    fabric = rail_optimized(8)  # 8 SUs x 32 nodes x 8 GPUs, 64 leaves, 32 spines
    assert fabric.total_gpus == 2048 and fabric.spines == 32

    topology = replay(jobs, fabric, "topology")
    first_fit = replay(jobs, fabric, "first-fit")

    assert topology["jobs"]["placed"] == first_fit["jobs"]["placed"] == 319
    assert topology["avg_leaves_per_job"] < first_fit["avg_leaves_per_job"]
    assert topology["avg_spines_per_job"] < first_fit["avg_spines_per_job"]
    assert topology["utilization"] >= first_fit["utilization"]


def test_kalos_jobs_larger_than_the_fabric_are_skipped_and_counted():
    jobs = load_kalos(KALOS)

    result = replay(jobs, rail_optimized(2), "topology")  # 512 GPUs

    too_large = sum(1 for j in jobs if j.gpus > 512)
    assert result["jobs"]["skipped_too_large"] == too_large > 0
    assert result["jobs"]["placed"] == 319 - too_large


def test_kalos_gangs_steer_around_miswired_nodes_more_often_than_first_fit():
    jobs = load_kalos(KALOS)
    fabric = rail_optimized(8, miswired_nodes=tuple(range(5, 256, 32)))  # one per SU

    topology = replay(jobs, fabric, "topology")
    first_fit = replay(jobs, fabric, "first-fit")

    assert topology["rail_aligned_fraction"] > first_fit["rail_aligned_fraction"]
