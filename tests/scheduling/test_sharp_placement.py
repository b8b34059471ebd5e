"""SHARP-aware placement on a designed 2,048-GPU fabric with few aggregation trees per switch.

The fabric is NVIDIA's rail-optimised SuperPOD shape: 8 SUs of 32 nodes x 8 GPUs (2,048 GPUs),
one leaf per rail per SU (64 leaves), 32 spines. The expectations are counted from the
capacities the tests set, not read back from the guard.
"""

from __future__ import annotations

import pytest

from designer.plan import plan
from scheduling.placement import Placement, PlacementEngine, Rejection, Request, rail_optimized
from scheduling.placement.sharp import REASON_SHARP, Sharp, SharpLedger, SharpTrees, capacity_of, switch
from scheduling.replay import ReplayOptions, TraceFormatError, TraceJob, load_trace, replay
from scheduling.services.topology import fabric_shape, topology_from_graph

SUS = 8
NODES_PER_SU = 32
RAILS = 8


def fabric(leaf_trees: int, spine_trees: int, *, sus_per_pod: int | None = None, core_trees: int = 1):
    topo = rail_optimized(SUS, NODES_PER_SU, 8, RAILS, sus_per_pod=sus_per_pod)
    assert topo.total_gpus == 2048
    ledger = SharpLedger(capacity_of(topo, leaf_trees, spine_trees, core_trees))
    engine = PlacementEngine(topo, guards=[SharpTrees(ledger)])
    return topo, ledger, engine


def place(engine: PlacementEngine, ledger: SharpLedger, bid: str, nodes: int, *, sharp: bool = True, **kw):
    request = Request(nodes=nodes, constraints=(Sharp(),) if sharp else (), **kw)
    result = engine.place(request, bid)
    # The engine told the guard: the ledger holds the tree's switches under the booking's id.
    if isinstance(result, Placement):
        assert ledger.holds.get(bid, frozenset()) == frozenset(result.sharp)
    return result


def test_leaf_trees_bound_sharp_jobs_and_a_release_frees_them() -> None:
    topo, ledger, engine = fabric(leaf_trees=2, spine_trees=64)
    # 4-node jobs sit in one SU, on its 8 rail leaves: each SU's leaves serve 2 trees.
    expected_capacity = SUS * 2
    placed = [place(engine, ledger, f"j{i}", 4) for i in range(expected_capacity)]
    assert all(isinstance(p, Placement) for p in placed)
    for p in placed:
        assert isinstance(p, Placement)
        su_leaves = {switch("leaf", x) for x in topo.groups[p.leaf_groups[0]].leaves}
        assert len(p.leaf_groups) == 1
        assert set(p.sharp[:-1]) == su_leaves and p.sharp[-1].startswith("spine")
    # Nodes are plentiful (64 of 256 used) but no leaf has a free tree left.
    refused = place(engine, ledger, "over", 4)
    assert isinstance(refused, Rejection)
    assert refused.reason == REASON_SHARP
    assert "has no free aggregation tree; 2 jobs hold its trees" in refused.message
    assert refused.message.startswith("SHARP requested: leaf")
    assert refused.details["trees"] == 2 and refused.details["trees_held"] == 2
    # The same request without SHARP is placed.
    assert isinstance(place(engine, ledger, "plain", 4, sharp=False), Placement)
    # Releasing one SHARP job frees its trees: the next SHARP job lands on that job's SU.
    freed = placed[5]
    assert isinstance(freed, Placement)
    engine.release("j5")
    again = place(engine, ledger, "again", 4)
    assert isinstance(again, Placement)
    assert again.leaf_groups == freed.leaf_groups


def test_a_full_spine_layer_refuses_with_the_holders_named() -> None:
    topo, ledger, engine = fabric(leaf_trees=64, spine_trees=1)
    # Every leaf of the single pod uplinks to every spine: one tree per spine, 32 multi-leaf jobs.
    assert topo.spines == 32
    roots = set()
    for i in range(topo.spines):
        p = place(engine, ledger, f"j{i}", 2)
        assert isinstance(p, Placement)
        roots.add(p.sharp[-1])
    assert roots == {switch("spine", s) for s in range(32)}
    refused = place(engine, ledger, "over", 2)
    assert isinstance(refused, Rejection)
    assert refused.reason == REASON_SHARP
    assert refused.message.startswith("SHARP requested: spine")
    assert refused.message.endswith("has no free aggregation tree; 1 job holds its tree")


def test_beyond_capacity_queues_to_the_end_of_a_holder() -> None:
    topo, ledger, engine = fabric(leaf_trees=1, spine_trees=64)
    ends = []
    for su in range(SUS):
        end = 100.0 * (su + 1)
        p = place(engine, ledger, f"j{su}", 4, start=0.0, end=end)
        assert isinstance(p, Placement)
        ends.append(end)
    # Every SU's leaves carry one tree, all held: a new SHARP job waits for the first to end.
    request = Request(nodes=4, start=0.0, end=50.0, constraints=(Sharp(),))
    assert isinstance(engine.preview(request, explain=False), Rejection)
    later = engine.earliest_window(request, after=0.0, duration=50.0)
    assert later is not None and later.start == min(ends)
    assert later.sharp and set(later.sharp) >= {switch("leaf", x) for x in topo.groups[later.leaf_groups[0]].leaves}


def test_a_job_across_pods_climbs_to_a_core() -> None:
    topo, ledger, engine = fabric(leaf_trees=4, spine_trees=4, sus_per_pod=4, core_trees=1)
    assert topo.cores > 0
    p = place(engine, ledger, "wide", 5 * NODES_PER_SU)
    assert isinstance(p, Placement)
    pods = {topo.groups[g].pod for g in p.leaf_groups}
    assert pods == {0, 1}
    spines = [s for s in p.sharp if s.startswith("spine")]
    assert len(spines) == 2 and p.sharp[-1] == switch("core", 0)
    leaves = {switch("leaf", x) for g in p.leaf_groups for x in topo.groups[g].leaves}
    assert set(p.sharp) == leaves | set(spines) | {switch("core", 0)}


def test_switches_without_trees_refuse() -> None:
    _, ledger, engine = fabric(leaf_trees=0, spine_trees=0)
    refused = place(engine, ledger, "x", 2)
    assert isinstance(refused, Rejection)
    assert "offers no aggregation tree (not SHARP-capable)" in refused.message


def test_a_one_node_job_asks_for_no_tree() -> None:
    # its reduction stays on NVLink: placed with no tree even where no switch has one
    _, ledger, engine = fabric(leaf_trees=0, spine_trees=0)
    p = place(engine, ledger, "one", 1)
    assert isinstance(p, Placement) and p.sharp == () and "one" not in ledger.holds


def test_replay_reports_sharp_requests_placed_waited_and_refused() -> None:
    topo = rail_optimized(SUS, NODES_PER_SU, 8, RAILS)
    capacity = capacity_of(topo, 1, 64, 0)
    # 32 jobs of 4 nodes at t=0 for 100 s; half of them (every second one) ask for SHARP
    jobs = [TraceJob(f"j{i}", 0.0, 100.0, 32) for i in range(32)]
    result = replay(jobs, topo, options=ReplayOptions(sharp_share=0.5, sharp_trees=capacity))
    # one tree per leaf: one SHARP job per SU at a time, 8 SUs: 8 start at once, 8 wait 100 s
    assert result["sharp"] == {"requested": 16, "placed": 16, "waited": 8, "refused": 0}
    assert result["jobs"]["placed"] == 32
    # no tree anywhere: the SHARP jobs are refused, the others run
    none = replay(jobs, topo, options=ReplayOptions(sharp_share=0.5, sharp_trees={}))
    assert none["sharp"] == {"requested": 16, "placed": 0, "waited": 0, "refused": 16}
    assert none["jobs"]["placed"] == 16
    # without SHARP the result has no sharp figures (the public keys are unchanged)
    assert "sharp" not in replay(jobs, topo)


def test_generic_traces_carry_a_sharp_column(tmp_path) -> None:
    good = tmp_path / "t.csv"
    good.write_text("job_id,arrival_s,duration_s,gpus,sharp\na,0,10,16,1\nb,1,10,16,0\nc,2,10,16,\n")
    jobs = load_trace(good)
    assert [any(isinstance(c, Sharp) for c in j.constraints) for j in jobs] == [True, False, False]
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,arrival_s,duration_s,gpus,sharp\na,0,10,16,yes\n")
    with pytest.raises(TraceFormatError, match=r"bad.csv:2: column 'sharp' must be 0 or 1"):
        load_trace(bad)


def test_a_designed_fabric_carries_its_models_trees_and_an_import_only_its_aggregation_nodes() -> None:
    graph = plan({"topology": "rail-optimized", "gpus": 2048, "switch": "QM9700"}).graph
    named = topology_from_graph(graph)
    switches = {n for n, sw in graph.switches.items() if sw.tier in ("leaf", "spine")}
    # every QM9700 serves 64 trees (1 per port), by design name and by engine key
    assert fabric_shape(graph).sharp_trees == dict.fromkeys(switches, 64)
    assert set(named.sharp_trees) == {named.switch_keys()[n] for n in switches}
    # an imported fabric: only the switches discovery found an Aggregation Node in serve trees
    leaf_name = named.leaf_names[0]
    graph.meta["sharp"] = [leaf_name]
    assert fabric_shape(graph).sharp_trees == {leaf_name: 64}
