"""The replay's communication model (issue 39): a job runs longer the higher the tier its traffic
crosses, ends before the time limit it booked, and goodput counts the trace's work only."""

from __future__ import annotations

import pytest

from scheduling.placement import Placement, PlacementEngine, Request, rail_optimized
from scheduling.replay import ReplayOptions, TraceJob, simulate
from scheduling.replay.comm import CommModel, oversubscription_of
from tests.scheduling.sched_helpers import occupy

# Fluidstack's 256-GPU job, written here from the published figures (not read from the module)
SPINE, CORE = 0.65, 0.46


def placement(nodes: int, groups: int) -> Placement:
    """A placement of ``nodes`` whole nodes over ``groups`` SUs of a 4-SU, 4-node-per-SU pool."""
    engine = PlacementEngine(rail_optimized(4, nodes_per_su=4))
    busy = list(range(4 * (4 - groups)))  # the other SUs full
    if groups > 1:  # and too few free nodes in each remaining SU for one of them to hold the gang
        per = nodes // groups
        busy += [n for su in range(4 - groups, 4) for n in range(4 * su, 4 * su + 4 - per)]
    occupy(engine, busy, booking_id="busy")
    placed = engine.search(Request(nodes=nodes, start=0, end=10), 0, 10, explain=False)
    assert isinstance(placed, Placement) and len(placed.leaf_groups) == groups
    return placed


def test_the_stretch_is_the_tier_crossed():
    model = CommModel()
    assert model.stretch(placement(1, 1)) == 1.0  # one node: NVLink
    assert model.stretch(placement(4, 1)) == 1.0  # one leaf group: traffic stays on the rail leaves
    assert model.stretch(placement(4, 2)) == pytest.approx(1 / SPINE)
    oversubscribed = CommModel(oversubscription=2.0)
    assert oversubscribed.stretch(placement(4, 2)) == pytest.approx(1 + (1 / SPINE - 1) * 2)
    assert model.limit(4, pods=1) == pytest.approx(1 / SPINE) and model.limit(4, pods=2) == pytest.approx(1 / CORE)
    assert model.limit(1, pods=2) == 1.0
    assert oversubscription_of("2:1") == 2.0 and oversubscription_of("1:1") == 1.0 and oversubscription_of(None) == 1.0
    with pytest.raises(ValueError):
        CommModel(spine_throughput=0.4, core_throughput=0.5)


def test_a_job_across_the_spines_runs_longer_ends_before_its_limit_and_frees_its_nodes_early():
    topo = rail_optimized(2, nodes_per_su=2)  # two SUs of two nodes: a 3-node job must cross
    jobs = [
        TraceJob("wide", arrival_s=0, duration_s=1000, gpus=24, gpus_per_node=8),  # 3 nodes, 2 SUs
        TraceJob("next", arrival_s=10, duration_s=100, gpus=32, gpus_per_node=8),  # the whole pool
    ]
    plain = simulate(jobs, topo, "topology")
    modelled = simulate(jobs, topo, "topology", ReplayOptions(comm=CommModel()))
    ends = {r.job.job_id: (r.start, r.end) for r in modelled.records}
    assert ends["wide"] == (0, pytest.approx(1000 / SPINE))
    # it booked 1000/0.65 s as its limit, ended then, and the next job (the whole pool: across
    # the spines too) started at once
    assert ends["next"] == (pytest.approx(1000 / SPINE), pytest.approx(1100 / SPINE))
    assert {r.job.job_id: (r.start, r.end) for r in plain.records} == {"wide": (0, 1000), "next": (1000, 1100)}

    summary = modelled.summary()
    period = 1100 / SPINE
    assert summary["utilization"] == pytest.approx((24 * 1000 + 32 * 100) / SPINE / (32 * period))
    assert summary["goodput"] == pytest.approx((24 * 1000 + 32 * 100) / (32 * period))
    assert plain.summary()["goodput"] == plain.summary()["utilization"]


def test_a_job_that_ends_early_frees_its_window_for_the_queue():
    # Under the model a packed 2-node job asks for 1000/0.65 s but ends at 1000: a job queued
    # behind it starts at 1000, not at its limit.
    topo = rail_optimized(2, nodes_per_su=2)
    jobs = [
        TraceJob("packed", arrival_s=0, duration_s=1000, gpus=16, gpus_per_node=8),  # one SU
        TraceJob("other", arrival_s=0, duration_s=1000, gpus=16, gpus_per_node=8),  # the other SU
        TraceJob("queued", arrival_s=5, duration_s=50, gpus=32, gpus_per_node=8),
    ]
    records = {r.job.job_id: r for r in simulate(jobs, topo, "topology", ReplayOptions(comm=CommModel())).records}
    assert records["packed"].end == 1000 and records["other"].end == 1000
    assert records["queued"].start == 1000


def test_utilisation_while_jobs_wait_counts_only_the_time_some_job_waited():
    topo = rail_optimized(2, nodes_per_su=2)  # 4 nodes of 8 GPUs
    jobs = [
        TraceJob("a", arrival_s=0, duration_s=100, gpus=24, gpus_per_node=8),  # 3 nodes, 0-100
        TraceJob("b", arrival_s=10, duration_s=50, gpus=16, gpus_per_node=8),  # waits 10-100 for a
        TraceJob("c", arrival_s=120, duration_s=20, gpus=8, gpus_per_node=8),  # starts at once
        TraceJob("d", arrival_s=130, duration_s=10, gpus=32, gpus_per_node=8),  # waits 130-150
    ]
    summary = simulate(jobs, topo, "topology").summary()
    # waiting: [10, 100) and [130, 150); busy then: a 24 GPUs × 90 s, b 16 × 20 s, c 8 × 10 s
    expected = (24 * 90 + 16 * 20 + 8 * 10) / (32 * (90 + 20))
    assert summary["utilization_waiting"] == pytest.approx(expected)
    assert summary["goodput_waiting"] == pytest.approx(expected)  # no model: every run is useful
    assert summary["utilization"] == pytest.approx((24 * 100 + 16 * 50 + 8 * 20 + 32 * 10) / (32 * 160))
    alone = simulate(jobs[:1], topo, "topology").summary()
    assert alone["utilization_waiting"] is None and alone["goodput_waiting"] is None


def test_the_drain_longest_first_ends_a_finite_trace_sooner():
    topo = rail_optimized(1, nodes_per_su=2)  # two nodes of 8 GPUs
    jobs = [
        TraceJob("a1", arrival_s=0, duration_s=10, gpus=8, gpus_per_node=8),
        TraceJob("a2", arrival_s=0, duration_s=10, gpus=8, gpus_per_node=8),
        TraceJob("b", arrival_s=1, duration_s=10, gpus=8, gpus_per_node=8),
        TraceJob("c", arrival_s=2, duration_s=10, gpus=8, gpus_per_node=8),
        TraceJob("d", arrival_s=3, duration_s=100, gpus=8, gpus_per_node=8),
    ]

    def ends(options: ReplayOptions) -> dict[str, float]:
        return {r.job.job_id: r.end for r in simulate(jobs, topo, "topology", options).records}

    # FIFO: b and c at 10, d only at 20; longest first once all arrived: d at 10 beside b (which
    # holds the head's reservation since before d arrived), c after b
    assert ends(ReplayOptions()) == {"a1": 10, "a2": 10, "b": 20, "c": 20, "d": 120}
    assert ends(ReplayOptions(drain_longest_first=True)) == {"a1": 10, "a2": 10, "b": 20, "c": 30, "d": 110}
