"""canvas_view(): levels of detail and a deterministic, fast tiered layout."""

from __future__ import annotations

import pytest

from designer.canvas import AUTO_DETAIL_SWITCHES, CanvasError, canvas_view
from designer.plan import plan

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "switch": "QM9700", "node_type": "DGX-H100"}


@pytest.fixture(scope="module")
def one_su():
    return plan(ONE_SU).graph


@pytest.fixture(scope="module")
def eight_su():
    return plan({**ONE_SU, "gpus": 2048}).graph


@pytest.fixture(scope="module")
def big():
    return plan({**ONE_SU, "gpus": 16384}).graph


def by_kind(view: dict, kind: str) -> list[dict]:
    return [n for n in view["nodes"] if n["kind"] == kind]


def test_small_design_shows_every_switch_with_hosts_collapsed_behind_leaves(one_su):
    # given a 1-SU design: [32 DGX] --256-- [8 leaves] --256-- [4 spines]
    view = canvas_view(one_su)
    assert view["level"] == "pod"
    switches = by_kind(view, "switch")
    assert sorted(n["tier"] for n in switches) == ["leaf"] * 8 + ["spine"] * 4
    hosts = by_kind(view, "node-group")
    assert len(hosts) == 8 and {h["label"] for h in hosts} == {"32 nodes"}
    # every edge end exists, links are bundled per device pair and none are lost
    ids = {n["id"] for n in view["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in view["edges"])
    assert sum(e["count"] for e in view["edges"]) == 512
    leaf = next(n for n in switches if n["id"] == "su01-leaf-r1")
    assert (leaf["ports_used"], leaf["ports_total"], leaf["parent"]) == (64, 64, "su-1")


def test_tiers_are_rows_spines_above_leaves_above_hosts(one_su):
    view = canvas_view(one_su, "pod")
    ys = {n["tier"]: n["y"] for n in view["nodes"] if n["kind"] != "group"}
    assert ys["spine"] < ys["leaf"] < ys["node"]
    leaves = sorted((n for n in by_kind(view, "switch") if n["tier"] == "leaf"), key=lambda n: n["x"])
    assert [n["id"] for n in leaves] == [f"su01-leaf-r{i}" for i in range(1, 9)]


def test_layout_is_deterministic(eight_su):
    assert canvas_view(eight_su) == canvas_view(eight_su)


def test_fabric_level_bundles_links_between_scalable_units_and_spine_tier(eight_su):
    view = canvas_view(eight_su, "fabric")
    groups = {n["id"]: n for n in view["nodes"]}
    assert set(groups) == {f"su-{i}" for i in range(1, 9)} | {"tier-spine"}
    assert "8 leaves · 32 nodes" in groups["su-3"]["label"]
    edges = {(e["source"], e["target"]): e["count"] for e in view["edges"]}
    assert edges[("su-1", "tier-spine")] == 256  # 8 leaves x 32 uplinks
    assert groups["tier-spine"]["y"] < groups["su-1"]["y"]


def test_drilling_into_a_scalable_unit_collapses_the_others(eight_su):
    view = canvas_view(eight_su, "pod", "su-2")
    switches = by_kind(view, "switch")
    assert {n["id"] for n in switches if n["tier"] == "leaf"} == {f"su02-leaf-r{i}" for i in range(1, 9)}
    assert sum(n["tier"] == "spine" for n in switches) == 32  # the spine tier stays expanded
    collapsed = [n for n in by_kind(view, "group") if not n["data"].get("compound")]
    assert len(collapsed) == 7
    assert [c["label"] for c in view["breadcrumbs"]] == ["Fabric", "SU 2"]


def test_switch_level_is_the_port_table(one_su):
    view = canvas_view(one_su, "switch", "su01-leaf-r1")
    ports = view["ports"]
    assert len(ports) == 64 and not any(p["free"] for p in ports)
    first = ports[0]
    assert (first["peer"], first["tier"]) == ("su01-n01", "node_leaf")
    assert first["cable"] and first["length_m"] > 0
    assert ports[-1]["peer"].startswith("spine-")
    assert len(by_kind(view, "port")) == 64
    assert [c["level"] for c in view["breadcrumbs"]] == ["fabric", "pod", "switch"]


def test_switch_level_shows_a_disconnected_port_as_free(one_su):
    graph = one_su.copy()
    graph.disconnect("su01-leaf-r1", 64)
    view = canvas_view(graph, "switch", "su01-leaf-r1")
    assert view["ports"][63]["free"] and view["ports"][63]["peer"] == ""
    leaf = next(n for n in view["nodes"] if n["id"] == "su01-leaf-r1")
    assert leaf["ports_used"] == 63


def test_auto_shows_the_overview_for_big_fabrics(big):
    # Speed is measured in tests/benchmarks/bench_designer_canvas.py, not asserted here.
    assert len(big.switches) > AUTO_DETAIL_SWITCHES
    view = canvas_view(big)
    assert view["level"] == "fabric"
    assert {n["id"] for n in view["nodes"]} == {f"pod-{i}" for i in range(1, 17)} | {"tier-core"}
    pod = canvas_view(big, "pod", "pod-1")
    assert len(by_kind(pod, "switch")) == 64  # 32 leaves + 32 spines; 256 cores stay a box


def test_bad_level_or_focus_names_what_exists(one_su):
    with pytest.raises(CanvasError, match="choose auto, fabric, pod, switch"):
        canvas_view(one_su, "rack")
    with pytest.raises(CanvasError, match="su-1"):
        canvas_view(one_su, "pod", "su-9")
    with pytest.raises(CanvasError, match="switch name"):
        canvas_view(one_su, "switch", "nope")


@pytest.mark.parametrize(
    "options",
    [
        {"topology": "fat-tree", "gpus": 512},
        {
            "topology": "torus",
            "nodes": 64,
            "dims": "4x4x4",
            "node_type": "generic",
            "gpus_per_node": 1,
            "hcas_per_node": 1,
        },
        {"topology": "dragonfly-plus", "nodes": 256},
    ],
)
def test_other_topologies_draw_every_switch_once(options):
    graph = plan(options).graph
    view = canvas_view(graph, "pod")
    assert sorted(n["id"] for n in by_kind(view, "switch")) == sorted(graph.switches)
    positions = {(n["x"], n["y"]) for n in by_kind(view, "switch")}
    assert len(positions) == len(graph.switches)  # no two switches on top of each other
