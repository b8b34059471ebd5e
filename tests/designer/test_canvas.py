"""canvas_view(): levels of detail and a deterministic, fast tiered layout."""

from __future__ import annotations

import pytest

from designer.canvas import AUTO_DETAIL_SWITCHES, MIN_LABEL_PX, CanvasError, canvas_view
from designer.canvas.elements import label_px_at_fit
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
    # the spine tier in the middle, the 8 SUs round it (a 3 x 3 grid's border)
    sus = [groups[f"su-{i}"] for i in range(1, 9)]
    spine = groups["tier-spine"]
    assert min(n["x"] for n in sus) < spine["x"] < max(n["x"] for n in sus)
    assert min(n["y"] for n in sus) < spine["y"] < max(n["y"] for n in sus)


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


@pytest.fixture(scope="module")
def three_tier():
    """2,048 H100s in 3 levels: 2 pods of 4 scalable units (8 rail leaves each), 32 spines a pod, 32 cores."""
    return plan({**ONE_SU, "gpus": 2048, "levels": 3}).graph


def leaves_of_su(graph, su: int) -> set[str]:
    """An SU's leaves read from the generator's naming (suNN-leaf-rR), not from the canvas."""
    return {n for n in graph.switches if n.startswith(f"su{su:02d}-leaf-")}


def test_a_three_tier_pod_opens_on_its_scalable_units_round_its_spines(three_tier):
    fabric = canvas_view(three_tier, "fabric")
    pods = {n["id"]: n for n in fabric["nodes"]}
    assert set(pods) == {"pod-1", "pod-2", "tier-core"}
    assert pods["pod-1"]["data"]["sus"] == 4  # the browser drills into its SU level
    assert "sus" not in pods["tier-core"]["data"]

    view = canvas_view(three_tier, "fabric", "pod-1")
    assert (view["level"], view["focus"]) == ("fabric", "pod-1")
    boxes = {n["id"]: n for n in view["nodes"]}
    assert set(boxes) == {"su-1", "su-2", "su-3", "su-4", "pod-1", "tier-core"}  # pod 2 is not drawn
    assert boxes["su-3"]["label"] == "SU 3\n8 leaves · 32 nodes"
    assert boxes["pod-1"]["label"] == "Pod 1\n32 spines" and "sus" not in boxes["pod-1"]["data"]
    edges = {frozenset((e["source"], e["target"])): e["count"] for e in view["edges"]}
    # each leaf has 32 uplinks, one to every spine of its pod; each spine 32 to the cores
    assert edges == {
        **{frozenset(("pod-1", f"su-{i}")): 8 * 32 for i in range(1, 5)},
        frozenset(("pod-1", "tier-core")): 32 * 32,
    }
    # cores above the spines above the scalable units, as in a 2-level design's fabric level
    assert boxes["tier-core"]["y"] < boxes["pod-1"]["y"] < min(boxes[f"su-{i}"]["y"] for i in range(1, 5))
    assert [(c["level"], c["focus"], c["label"]) for c in view["breadcrumbs"]] == [
        ("fabric", None, "Fabric"),
        ("fabric", "pod-1", "Pod 1"),
    ]
    # the second pod's SUs are its own: SU 5 to SU 8
    assert {n["id"] for n in canvas_view(three_tier, "fabric", "pod-2")["nodes"]} >= {f"su-{i}" for i in range(5, 9)}


def test_a_scalable_unit_of_a_three_tier_pod_shows_its_leaves_under_the_pods_spines(three_tier):
    view = canvas_view(three_tier, "pod", "su-2")
    switches = {n["id"]: n for n in by_kind(view, "switch")}
    leaves = {s for s, n in switches.items() if n["tier"] == "leaf"}
    assert leaves == leaves_of_su(three_tier, 2)
    spines = [n for n in switches.values() if n["tier"] == "spine"]
    assert len(spines) == 32 and all(n["parent"] == "pod-1" for n in spines)
    assert max(n["y"] for n in spines) < min(switches[s]["y"] for s in leaves)
    collapsed = {n["id"] for n in by_kind(view, "group") if not n["data"].get("compound")}
    assert {"su-1", "su-3", "su-4", "pod-2"} <= collapsed and "su-2" not in collapsed
    assert len(by_kind(view, "node-group")) == 8  # 32 nodes behind each of the 8 rail leaves
    ids = {n["id"] for n in view["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in view["edges"])
    assert [c["label"] for c in view["breadcrumbs"]] == ["Fabric", "Pod 1", "SU 2"]
    # a leaf's crumbs pass through its SU, a spine's through its pod's switches
    leaf = canvas_view(three_tier, "switch", "su02-leaf-r3")
    assert [c["label"] for c in leaf["breadcrumbs"]] == ["Fabric", "Pod 1", "SU 2", "su02-leaf-r3"]
    spine = next(iter(n["id"] for n in spines))
    crumbs = canvas_view(three_tier, "switch", spine)["breadcrumbs"]
    assert [(c["level"], c["focus"]) for c in crumbs][1:3] == [("fabric", "pod-1"), ("pod", "pod-1")]
    # every switch of the pod at once is still one level down from the SU level
    assert len(by_kind(canvas_view(three_tier, "pod", "pod-1"), "switch")) == 32 + 32 + 32  # + the cores


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


# --- readable at any size (issue 15) ---------------------------------------------------------


def test_auto_opens_the_fabric_level_when_every_switch_would_be_unreadable(eight_su, one_su):
    # 96 switches fit under AUTO_DETAIL_SWITCHES but not on a canvas with 10-px labels
    assert len(eight_su.switches) <= AUTO_DETAIL_SWITCHES
    assert canvas_view(eight_su)["level"] == "fabric"
    assert canvas_view(one_su)["level"] == "pod"


@pytest.mark.parametrize(
    "level_focus", [("fabric", None), ("pod", "su-2"), ("switch", "su02-leaf-r3"), ("switch", "spine-07")]
)
def test_levels_of_2048_gpus_are_readable_when_fitted(eight_su, level_focus):
    view = canvas_view(eight_su, *level_focus)
    assert label_px_at_fit(view["nodes"]) >= MIN_LABEL_PX


@pytest.mark.parametrize(
    "level_focus", [("fabric", None), ("pod", "pod-9"), ("switch", "pod09-spine-05"), ("switch", "su40-leaf-r2")]
)
def test_levels_of_16384_gpus_are_readable_when_fitted(big, level_focus):
    view = canvas_view(big, *level_focus)
    assert view["level"] == level_focus[0]
    assert label_px_at_fit(view["nodes"]) >= MIN_LABEL_PX


def test_fabric_level_of_16_pods_fills_the_canvas_not_a_strip(big):
    view = canvas_view(big, "fabric")
    pods = [n for n in view["nodes"] if n["id"].startswith("pod-")]
    assert len({n["y"] for n in pods}) == 5 and len({n["x"] for n in pods}) == 5  # round a 5 x 5 grid
    assert len({(n["x"], n["y"]) for n in pods}) == 16
    xs = [n["x"] for n in view["nodes"]]
    ys = [n["y"] for n in view["nodes"]]
    assert 1 < (max(xs) - min(xs)) / (max(ys) - min(ys)) < 3  # about the canvas's shape


def test_every_switch_at_once_is_refused_above_the_detail_limit(big):
    with pytest.raises(CanvasError, match="1280 switches are too many to show at once: choose a group, pod-1"):
        canvas_view(big, "pod")


def test_a_focused_group_wraps_its_tiers_into_rows(big):
    view = canvas_view(big, "pod", "pod-3")
    leaves = [n for n in by_kind(view, "switch") if n["tier"] == "leaf"]
    assert len(leaves) == 32 and len({n["y"] for n in leaves}) == 4


def test_a_diff_is_drawn_on_the_union_of_both_revisions(one_su):
    new = one_su.copy()
    new.add_switch("spare-spine", "QM9700", "spine")
    new.disconnect("su01-leaf-r1", 64)
    new.connect("su01-leaf-r1", 64, "spare-spine", 1)
    view = canvas_view(new, "pod", diff_from=one_su)
    marks = {n["id"]: n.get("diff") for n in view["nodes"]}
    assert marks["spare-spine"] == "added"
    assert marks["su01-leaf-r2"] is None
    edges = {(e["source"], e["target"]): e.get("diff") for e in view["edges"]}
    assert edges[("spare-spine", "su01-leaf-r1")] == "added"
    # the unplugged uplink was one of the 8 cables of a leaf-spine bundle: that bundle is changed
    touched = [
        e for e in view["edges"] if e.get("diff") and e["source"] != "spare-spine" and e["target"] != "spare-spine"
    ]
    assert len(touched) == 1 and touched[0]["diff"] == "changed"
    assert touched[0]["diff_counts"] == {"removed": 1} and touched[0]["count"] == 8
    assert view["diff"]["switches"] == {"added": 1, "removed": 0, "changed": 0}
    assert view["diff"]["cables"]["added"] == 1 and view["diff"]["cables"]["removed"] == 1
    # a switch removed in the newer revision is still drawn, marked removed
    back = canvas_view(one_su, "pod", diff_from=new)
    assert {n["id"]: n.get("diff") for n in back["nodes"]}["spare-spine"] == "removed"
    # at fabric level the group holding it is marked changed
    fabric = canvas_view(new, "fabric", diff_from=one_su)
    assert any(n.get("diff") == "changed" for n in fabric["nodes"])
