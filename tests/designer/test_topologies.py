"""Torus and dragonfly+ sanity: counts, degrees, diameter and bisection."""

from __future__ import annotations

from collections import Counter

from designer.plan import plan
from designer.validation import validate


def test_torus_3d_counts_and_wraparound():
    result = plan(
        {
            "topology": "torus",
            "nodes": 256,
            "node_type": "generic",
            "gpus_per_node": 4,
            "hcas_per_node": 1,
            "dims": "4x4x4",
        }
    )
    s = result.summary()
    assert s["errors"] == []
    assert s["switches"] == {"torus": 64, "total": 64}
    assert s["cables"] == {"node_switch": 256, "torus_x": 64, "torus_y": 64, "torus_z": 64, "total": 448}
    assert s["diameter_switch_hops"] == 6  # 2 + 2 + 2
    degree = Counter()
    for lk in result.graph.links:
        if lk.tier.startswith("torus"):
            degree[lk.a] += 1
            degree[lk.b] += 1
    assert set(degree.values()) == {6}
    # cutting x in half crosses 2 rings' links × 16 rings
    assert s["bisection_bandwidth_gbps"] == min(256 * 400 / 2, 32 * 400)


def test_torus_2d_and_torus_config_and_damaged_ring():
    from designer.exports import export

    result = plan(
        {
            "topology": "torus",
            "nodes": 32,
            "node_type": "generic",
            "gpus_per_node": 4,
            "hcas_per_node": 1,
            "dims": "8x4",
            "hosts_per_switch": 1,
        }
    )
    assert result.summary()["switches"]["total"] == 32
    conf = export(result.graph, "torus-2qos")[0]
    assert "torus 8 4 1" in conf
    origin = result.graph.switches["sw-00-00-00"].guid
    assert f"xp_link 0x{origin:016x} 0x{result.graph.switches['sw-01-00-00'].guid:016x}" in conf
    assert f"xm_link 0x{origin:016x} 0x{result.graph.switches['sw-07-00-00'].guid:016x}" in conf
    edited = result.graph.copy()
    edited.disconnect("sw-00-00-00", 2)
    assert any(i.code == "torus-dims" for i in validate(edited).warnings)


def test_torus_too_small_is_explained():
    s = plan(
        {
            "topology": "torus",
            "nodes": 200,
            "node_type": "generic",
            "gpus_per_node": 1,
            "hcas_per_node": 1,
            "dims": "2x2x2",
            "hosts_per_switch": 16,
        }
    ).summary()
    assert s["errors"] and "holds 128 endpoints, 200 requested" in s["errors"][0]


def test_dragonfly_plus_groups_and_global_links():
    result = plan({"topology": "dragonfly-plus", "gpus": 4096})
    s = result.summary()
    assert s["errors"] == []
    assert s["switches"] == {"leaf": 128, "spine": 128, "total": 256}
    meta = result.graph.meta
    assert meta["groups"] == 4 and meta["spines_per_group"] == 32
    pairs = Counter()
    for lk in result.graph.links:
        if lk.tier == "global":
            ga, gb = result.graph.switches[lk.a].pod, result.graph.switches[lk.b].pod
            assert ga != gb
            pairs[frozenset((ga, gb))] += 1
    assert len(pairs) == 6 and len(set(pairs.values())) == 1
    assert s["cables"]["global"] == 6 * meta["global_links_per_pair"]
    assert s["diameter_switch_hops"] == 3
