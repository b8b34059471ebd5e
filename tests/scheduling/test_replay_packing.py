"""Packing without losing throughput (issue 16): the node choice around other bookings in time,
the synthetic trace generator, and topology against first-fit on a generated trace."""

from __future__ import annotations

import math
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduling.placement import Placement, PlacementEngine, Request, rail_optimized
from scheduling.replay import load_generic, replay
from scheduling.replay.generator import TraceSpec, clipped_lognormal_mean, generate, offered_load, write_csv
from tests.scheduling.sched_helpers import occupy

HOUR = 3600.0


def test_a_reservation_takes_the_nodes_busy_until_just_before_it_leaving_idle_ones_for_backfill():
    # One SU of 4 nodes. Nodes 0 and 1 idle now; node 2 busy until 100; node 3 until 90.
    # Two nodes from t=100: the ones busy until 100 and 90 waste 0 + 10 s; the idle ones 100 s each.
    engine = PlacementEngine(rail_optimized(1, nodes_per_su=4))
    occupy(engine, [2], end=100, booking_id="until-100")
    occupy(engine, [3], end=90, booking_id="until-90")

    result = engine.search(Request(nodes=2, start=100, end=200), 100, 200, explain=False)

    assert isinstance(result, Placement)
    assert sorted(result.node_ids) == [2, 3]


def test_a_job_placed_now_fills_the_gap_before_a_reservation_first():
    # One SU of 4 nodes, all idle now; nodes 2 and 3 are booked from t=60 on. A 50 s job for one
    # node fits before that booking on 2 or 3 (10 s left idle) and should not take an open node.
    engine = PlacementEngine(rail_optimized(1, nodes_per_su=4))
    occupy(engine, [2], start=60, end=1000, booking_id="later-2")
    occupy(engine, [3], start=80, end=1000, booking_id="later-3")

    result = engine.search(Request(nodes=1, start=0, end=50), 0, 50, explain=False)

    assert isinstance(result, Placement)
    assert result.node_ids == (2,)


def test_the_time_fit_never_outranks_the_choice_of_leaf_group():
    # SU0: 4 nodes free now, nodes 0 and 1 booked from t=60 (a tight time fit for a 50 s job);
    # SU1: node 7 busy, 3 free. Three nodes for 50 s: best fit by group takes SU1 (3 free, the
    # fullest group that holds them) although SU0 has the tighter time fit.
    engine = PlacementEngine(rail_optimized(2, nodes_per_su=4))
    occupy(engine, [0, 1], start=60, end=1000, booking_id="later")
    occupy(engine, [7], booking_id="busy")

    result = engine.search(Request(nodes=3, start=0, end=50), 0, 50, explain=False)

    assert isinstance(result, Placement)
    assert result.leaf_groups == (1,) and sorted(result.node_ids) == [4, 5, 6]


def test_the_generator_is_deterministic_and_offers_the_load_asked():
    spec = TraceSpec(jobs=4000, load=0.5, seed=7)

    jobs = generate(spec)

    assert jobs == generate(spec)
    assert jobs != generate(TraceSpec(jobs=4000, load=0.5, seed=8))
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    assert {j.gpus for j in jobs} <= {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
    assert all(60 <= j.duration_s <= 24 * HOUR for j in jobs)
    assert all(j.gpus_per_node == min(j.gpus, 8) for j in jobs)
    # 4,000 draws: the offered load is within 15 % of the asked one (heavy-tailed sizes x durations).
    assert offered_load(jobs, 2048) == pytest.approx(0.5, rel=0.15)


def test_the_clipped_lognormal_mean_matches_its_limits():
    # No spread: the median itself; huge bounds: the lognormal mean e^(mu + s^2/2).
    assert clipped_lognormal_mean(600, 0, 1, 1e9) == 600
    assert clipped_lognormal_mean(600, 1.0, 1e-9, 1e15) == pytest.approx(600 * math.exp(0.5), rel=1e-6)
    # Bounds equal to the median: everything is clipped to it.
    assert clipped_lognormal_mean(600, 1.5, 600, 600) == pytest.approx(600)


def test_the_arrival_rate_offers_the_load_of_the_capacity():
    spec = TraceSpec(jobs=10, load=0.8, capacity_gpus=1000, size_mix=((10, 1.0),), median_duration_s=100, sigma=0)

    # 0.8 x 1,000 GPUs / (10 GPUs x 100 s) = 0.8 jobs per second.
    assert spec.arrival_rate() == pytest.approx(0.8)
    with pytest.raises(ValueError):
        TraceSpec(load=0)


def test_a_written_trace_reads_back_through_the_generic_loader(tmp_path):
    jobs = generate(TraceSpec(jobs=50, load=0.3, seed=3))
    path = tmp_path / "trace.csv"

    assert write_csv(jobs, path) == 50

    assert load_generic(path) == jobs


#: A small fabric (4 SUs of 8 nodes, 256 GPUs) and a mix that fits it.
SMALL = rail_optimized(4, nodes_per_su=8)
SMALL_MIX = ((1, 0.3), (4, 0.1), (8, 0.25), (16, 0.15), (32, 0.12), (64, 0.08))


def small_trace(load: float, seed: int):
    return generate(
        TraceSpec(
            jobs=300,
            load=load,
            capacity_gpus=SMALL.total_gpus,
            size_mix=SMALL_MIX,
            median_duration_s=1800,
            sigma=1.0,
            max_duration_s=6 * HOUR,
            seed=seed,
        )
    )


def test_topology_packs_tighter_without_losing_utilisation_on_a_saturated_generated_trace():
    # Load 1.1, seed 5: with the node choice blind to time, the topology policy's utilisation
    # was 0.6824 against first-fit's 0.6852 on this trace. The bound is issue 39's: no more than
    # 1 % below first-fit, over the busy period and while jobs wait.
    jobs = small_trace(1.1, 5)

    topology = replay(jobs, SMALL, "topology")
    first_fit = replay(jobs, SMALL, "first-fit")

    assert topology["jobs"]["placed"] == first_fit["jobs"]["placed"] == 300
    assert topology["utilization"] >= 0.99 * first_fit["utilization"]
    assert topology["utilization_waiting"] >= 0.99 * first_fit["utilization_waiting"]
    assert topology["avg_wait_s"] <= first_fit["avg_wait_s"]
    assert topology["avg_leaves_per_job"] < first_fit["avg_leaves_per_job"]
    assert topology["avg_spines_per_job"] < first_fit["avg_spines_per_job"]


@pytest.mark.django_db  # the design's catalogue overrides are read
def test_trace_gen_cli_writes_a_trace_the_replay_cli_reads_with_patience(tmp_path):
    path = tmp_path / "syn.csv"
    out = StringIO()

    call_command(
        "schedule", "trace-gen", "--out", str(path), "--load", "0.3", "--jobs", "40", "--seed", "2", stdout=out
    )

    assert out.getvalue().startswith("40 jobs to ")
    assert load_generic(path) == generate(TraceSpec(jobs=40, load=0.3, seed=2))
    out = StringIO()
    call_command(
        "schedule",
        "replay",
        "--trace",
        str(path),
        "--design",
        "rail-optimized:gpus=256",
        "--max-wait",
        "30",
        "--json",
        stdout=out,
    )
    assert '"submitted": 40' in out.getvalue()
    with pytest.raises(CommandError, match="GPUS:WEIGHT"):
        call_command("schedule", "trace-gen", "--out", str(path), "--mix", "8-1")
