"""The published DGX SuperPOD rows and the 3-level counts from the brief, exactly."""

from __future__ import annotations

import pytest

from designer.plan import plan
from designer.sizing import fewest_dividing, tree_shape
from tests.designer.conftest import links_between
from tests.designer.reference_rows import B300_XDR, B300_XDR_ROWS


@pytest.mark.parametrize(
    ("sus", "gpus", "leaves", "spines", "node_leaf", "leaf_spine"),
    [
        (1, 256, 8, 4, 256, 256),
        (2, 512, 16, 8, 512, 512),
        (4, 1024, 32, 16, 1024, 1024),
        (8, 2048, 64, 32, 2048, 2048),
    ],
)
def test_superpod_reference_rows(catalogue, sus, gpus, leaves, spines, node_leaf, leaf_spine):
    # given the published SuperPOD parameters (DGX-H100, QM9700)
    result = plan({"topology": "rail-optimized", "gpus": gpus, "node_type": "DGX-H100", "switch": "QM9700"}, catalogue)
    # then the summary reproduces the row
    s = result.summary()
    assert s["errors"] == []
    assert s["gpus"] == gpus and s["nodes"] == sus * 32 and s["endpoints"] == gpus
    assert (s["switches"]["leaf"], s["switches"]["spine"], s["switches"]["core"]) == (leaves, spines, 0)
    assert s["switches"]["total"] == leaves + spines
    assert s["cables"]["node_leaf"] == node_leaf
    assert s["cables"]["leaf_spine"] == leaf_spine
    assert s["oversubscription"] == "1:1"
    assert s["diameter_switch_hops"] == 2
    assert s["bisection_bandwidth_gbps"] == gpus * 400 / 2
    # and every leaf is one rail of one SU with 32 nodes below it
    leaves_seen = [sw for sw in result.graph.switches.values() if sw.tier == "leaf"]
    assert {(sw.su, sw.index) for sw in leaves_seen} == {(su, r) for su in range(sus) for r in range(8)}


@pytest.mark.parametrize(("sus", "nodes", "gpus", "leaves", "spines", "node_leaf", "leaf_spine"), B300_XDR_ROWS)
def test_b300_xdr_superpod_rows(catalogue, sus, nodes, gpus, leaves, spines, node_leaf, leaf_spine):
    """NVIDIA's DGX B300 XDR SuperPOD table (published and derived numbers: tests/designer/reference_rows.py)."""
    # given the published parameters (DGX B300, Quantum-X800 Q3400) sized by GPUs
    result = plan({**B300_XDR, "gpus": gpus}, catalogue)
    s = result.summary()
    # then the row reproduces: 72 nodes per SU, a leaf per rail, the published spines and cables
    assert s["errors"] == []
    assert (s["nodes"], s["gpus"], s["endpoints"]) == (nodes, gpus, gpus)
    assert (s["switches"]["leaf"], s["switches"]["spine"], s["switches"]["core"]) == (leaves, spines, 0)
    assert (s["cables"]["node_leaf"], s["cables"]["leaf_spine"]) == (node_leaf, leaf_spine)
    assert s["levels"] == 2 and s["oversubscription"] == "1:1"
    assert s["bisection_bandwidth_gbps"] == gpus * 800 / 2
    assert result.graph.meta["su_nodes"] == 72 and result.graph.meta["scalable_units"] == sus
    # and every leaf sends the same number of links to every spine (ftree symmetry)
    per_leaf = links_between(result.graph, "leaf", "spine")
    assert {c for counts in per_leaf.values() for c in counts.values()} == {72 // spines}
    assert all(len(counts) == spines for counts in per_leaf.values())


def test_b300_spines_follow_the_dividing_rule_not_the_ceiling():
    # 4 SUs: 32 leaves × 72 uplinks = 2,304 ports; ⌈2,304 / 144⌉ = 16 does not divide 72 → 18
    assert fewest_dividing(32 * 72, 144, 72) == 18 and -(-32 * 72 // 144) == 16
    # 8 SUs: 64 × 72 = 4,608 ports; ⌈4,608 / 144⌉ = 32 does not divide 72 → 36
    assert fewest_dividing(64 * 72, 144, 72) == 36 and -(-64 * 72 // 144) == 32


@pytest.mark.parametrize(
    ("switch", "node_type", "su_nodes"),
    [("QM9700", "DGX-H100", 32), ("Q3400", "DGX-B300", 72), ("QM8700", "DGX-A100", 20), ("SB7800", "generic", 18)],
)
def test_scalable_unit_follows_the_switch_radix(catalogue, switch, node_type, su_nodes):
    # given one SU's worth of nodes on a k-port switch
    result = plan(
        {"topology": "rail-optimized", "nodes": su_nodes, "node_type": node_type, "switch": switch}, catalogue
    )
    assert result.ok, result.errors
    graph = result.graph
    # then the SU is k/2 nodes: one SU, every rail leaf with k/2 nodes down and k/2 links up
    assert graph.meta["su_nodes"] == catalogue.switch(switch).ports // 2 == su_nodes
    assert graph.meta["scalable_units"] == 1
    down = {name: 0 for name, sw in graph.switches.items() if sw.tier == "leaf"}
    for lk in graph.links:
        if lk.tier == "node_leaf":
            down[lk.b] += 1
    assert set(down.values()) == {su_nodes}
    # one node more opens a second SU
    more = plan(
        {"topology": "rail-optimized", "nodes": su_nodes + 1, "node_type": node_type, "switch": switch}, catalogue
    )
    assert more.graph.meta["scalable_units"] == 2


def test_oversubscribed_rail_leaf_keeps_the_radix_su(catalogue):
    # a 2:1 QM9700 leaf could take 42 nodes, but the SU stays k/2 = 32 with 16 uplinks per leaf
    result = plan({"topology": "rail-optimized", "gpus": 512, "oversubscription": "2:1"}, catalogue)
    assert result.ok, result.errors
    assert result.graph.meta["su_nodes"] == 32 and result.graph.meta["shape"]["leaf_up"] == 16


def test_rail_leaf_carries_only_its_rail(one_su):
    for lk in one_su.links:
        if lk.tier == "node_leaf":
            leaf = one_su.switches[lk.b]
            assert one_su.nodes[lk.a].rails[lk.a_port - 1] == leaf.index


@pytest.mark.parametrize(
    ("endpoints", "leaves", "spines", "cores"),
    [(16_384, 512, 512, 256), (4_096, 128, 128, 64)],
)
def test_three_level_counts(catalogue, endpoints, leaves, spines, cores):
    result = plan(
        {"topology": "fat-tree", "nodes": endpoints, "node_type": "generic", "gpus_per_node": 1, "hcas_per_node": 1},
        catalogue,
    )
    s = result.summary()
    assert s["errors"] == []
    assert s["levels"] == 3
    assert (s["switches"]["leaf"], s["switches"]["spine"], s["switches"]["core"]) == (leaves, spines, cores)
    # a non-blocking L-level tree uses L cables per host port
    assert s["cables"]["total"] == 3 * endpoints
    assert s["diameter_switch_hops"] == 4


def test_16k_gpu_rail_optimised_is_1280_switches(catalogue):
    s = plan({"topology": "rail-optimized", "gpus": 16_384}, catalogue).summary()
    assert s["switches"]["total"] == 1_280
    assert s["cables"] == {"node_leaf": 16_384, "leaf_spine": 16_384, "spine_core": 16_384, "total": 49_152}


def test_spines_divide_uplinks_not_ceiling(catalogue):
    # 3 SUs: 24 leaves × 32 uplinks = 768 ports → ⌈768/64⌉ = 12 spines would not divide 32
    s = plan({"topology": "rail-optimized", "gpus": 768}, catalogue)
    assert s.summary()["switches"]["spine"] == 16
    per_leaf = links_between(s.graph, "leaf", "spine")
    assert {c for counts in per_leaf.values() for c in counts.values()} == {2}
    assert all(len(counts) == 16 for counts in per_leaf.values())


def test_fewest_dividing_rule():
    assert fewest_dividing(768, 64, 32) == 16
    assert fewest_dividing(256, 64, 32) == 4
    assert fewest_dividing(4096, 64, 32) is None


def test_levels_auto_switches_to_three_beyond_k_squared_over_two():
    assert tree_shape(2048, 64).levels == 2
    assert tree_shape(2049, 64).levels == 3
    assert tree_shape(64, 64).levels == 1


def test_forced_two_levels_beyond_capacity_is_a_precise_error(catalogue):
    s = plan({"topology": "fat-tree", "gpus": 4096, "levels": 2}, catalogue).summary()
    assert s["errors"] == [
        "2 levels of QM9700 (64 ports) reach at most 2,048 endpoints at 1:1; 4,096 requested: use levels 3 or auto"
    ]


def test_forced_three_levels_small_fabric(catalogue):
    result = plan({"topology": "rail-optimized", "gpus": 2048, "levels": 3}, catalogue)
    s = result.summary()
    assert result.ok and s["levels"] == 3
    assert (s["switches"]["leaf"], s["switches"]["spine"], s["switches"]["core"]) == (64, 64, 32)
    assert s["diameter_switch_hops"] == 4  # two pods: leaf → spine → core → spine → leaf


def test_oversubscribed_leaf_ratio_and_bisection(catalogue):
    s = plan(
        {
            "topology": "fat-tree",
            "nodes": 2016,
            "node_type": "generic",
            "gpus_per_node": 1,
            "hcas_per_node": 1,
            "oversubscription": "2:1",
        },
        catalogue,
    ).summary()
    assert s["errors"] == []
    assert s["oversubscription"] == "2:1"
    assert s["bisection_bandwidth_gbps"] == pytest.approx(2016 * 400 / 2 / 2, rel=0.02)


def test_manager_slot_gives_31_nodes_and_an_appliance_per_su(catalogue):
    result = plan({"topology": "rail-optimized", "nodes": 248, "manager_slot": True}, catalogue)
    s = result.summary()
    assert s["errors"] == []
    assert not any("an SU holds" in w for w in s["warnings"])
    assert s["nodes"] == 248 and s["gpus"] == 1984
    assert (s["switches"]["leaf"], s["switches"]["spine"]) == (64, 32)
    appliances = [n for n in result.graph.nodes.values() if n.role == "manager"]
    assert len(appliances) == 8
    # the appliance takes the 32nd slot on the first rails of its SU
    ports = {(lk.b, lk.b_port) for lk in result.graph.links if lk.a == "su01-ufm"}
    assert ports == {("su01-leaf-r1", 32), ("su01-leaf-r2", 32)}


def test_manager_slot_with_gpus_not_filling_sus_warns(catalogue):
    s = plan({"topology": "rail-optimized", "gpus": 2048, "manager_slot": True}, catalogue).summary()
    assert any("an SU holds 31 nodes" in w for w in s["warnings"])
