"""The placement tail against first-fit (issue 39), held on the loads that were worst before the
policy change: seeded 1,200-job loads of ``bench_replay_tail.py`` (sizes up to 512 GPUs) on the
designed 2,048-GPU fabric, each replayed by both policies.

The bound is the issue's: topology-aware placement keeps the pool at least 99 % as busy as
first-fit while jobs wait, with at least 25 % fewer leaves and spines per multi-node job, and
under the communication model (a job across the spines runs at Fluidstack's 65 %) it does more
useful work than first-fit while jobs wait.

Worst before the change (2026-12-07 sweep of 30 seeds × gaps 20/30/60 s, `docs/benchmarks.md`):
seed 29 at 20 s (busy period −12.0 %: its last job, 8 GPUs for 18.8 h, started 9 h later) and
seed 21 at 20 s (while jobs wait −0.82 %, the worst of that figure).
"""

from __future__ import annotations

import pytest

from designer.plan import plan
from scheduling.replay import ReplayOptions, simulate
from scheduling.replay.comm import comm_model_of
from scheduling.replay.generator import DEFAULT_SIZE_MIX, TraceSpec, generate
from scheduling.services.topology import topology_from_graph

MIX = tuple((gpus, weight) for gpus, weight in DEFAULT_SIZE_MIX if gpus <= 512)
WORST_BEFORE = ((20.0, 29), (20.0, 21))


@pytest.fixture(scope="module")
def designed():
    graph = plan({"topology": "rail-optimized", "gpus": 2048}).graph
    assert graph is not None
    return graph, topology_from_graph(graph).topology


@pytest.mark.parametrize(("gap", "seed"), WORST_BEFORE)
def test_the_worst_loads_before_the_change_hold_the_bound(designed, gap, seed):
    graph, topology = designed
    jobs = generate(TraceSpec(jobs=1200, rate=1.0 / gap, size_mix=MIX, seed=seed))
    topo = simulate(jobs, topology, "topology").summary()
    first = simulate(jobs, topology, "first-fit").summary()
    assert topo["jobs"]["placed"] == first["jobs"]["placed"] == 1200
    assert topo["utilization_waiting"] >= 0.99 * first["utilization_waiting"]
    assert topo["avg_leaves_per_job"] <= 0.75 * first["avg_leaves_per_job"]
    assert topo["avg_spines_per_job"] <= 0.75 * first["avg_spines_per_job"]
    if seed == 29:
        comm = ReplayOptions(comm=comm_model_of(graph))
        useful = [simulate(jobs, topology, p, comm).summary()["goodput_waiting"] for p in ("topology", "first-fit")]
        assert useful[0] > useful[1]
