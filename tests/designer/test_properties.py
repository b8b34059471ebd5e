"""Property tests over random parameters: ports, symmetry, cable count, round-trips."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from designer.builtin_catalogue import DEFAULT_CATALOGUE
from designer.exports import export
from designer.imports import graph_from_dict, graph_from_ibnetdiscover
from designer.plan import plan
from tests.designer.conftest import graph_identity, links_between, ports_used

SETTINGS = settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

tree_options = st.fixed_dictionaries(
    {
        "topology": st.sampled_from(["fat-tree", "rail-optimized"]),
        "nodes": st.integers(1, 300),
        "node_type": st.just("generic"),
        "gpus_per_node": st.sampled_from([1, 4, 8]),
        "hcas_per_node": st.sampled_from([1, 2, 4, 8]),
        "switch": st.sampled_from(["QM9700", "QM8700", "SB7800", "Q3400"]),
        "oversubscription": st.sampled_from(["1:1", "2:1", "3:1", "5:3"]),
        "levels": st.sampled_from(["auto", "auto", 2, 3]),
    }
)

other_options = st.one_of(
    st.fixed_dictionaries(
        {
            "topology": st.just("torus"),
            "nodes": st.integers(1, 200),
            "node_type": st.just("generic"),
            "gpus_per_node": st.just(1),
            "hcas_per_node": st.sampled_from([1, 2]),
            "dims": st.sampled_from([None, "3x3", "4x4x2", "2x2x2", "5x3x3"]),
            "hosts_per_switch": st.sampled_from([None, 4, 16]),
        }
    ),
    st.fixed_dictionaries(
        {
            "topology": st.just("dragonfly-plus"),
            "nodes": st.integers(1, 600),
            "node_type": st.just("generic"),
            "gpus_per_node": st.just(8),
            "hcas_per_node": st.sampled_from([1, 8]),
            "switch": st.sampled_from(["QM9700", "QM8700"]),
        }
    ),
)


def _check_ports_and_cables(graph) -> None:
    used = ports_used(graph)
    # no port carries two cables, no port number beyond the model
    assert max(used.values()) == 1
    for (device, port), _ in used.items():
        assert 1 <= port <= graph.port_count(device)
    # cables = ports used / 2
    assert sum(used.values()) == 2 * len(graph.links)
    # every HCA is cabled
    assert sum(1 for (d, _) in used if d in graph.nodes) == graph.endpoints()


@SETTINGS
@given(tree_options)
def test_trees_respect_ports_and_ftree_symmetry(options):
    result = plan(options)
    if result.graph is None:
        assert result.errors and all(i.message for i in result.errors)
        return
    graph = result.graph
    assert result.errors == [], result.errors
    _check_ports_and_cables(graph)
    for lower, upper in (("leaf", "spine"), ("spine", "core")):
        per_switch = links_between(graph, lower, upper)
        counts = {c for ups in per_switch.values() for c in ups.values()}
        assert len(counts) <= 1  # the same number of links to every upper switch
        groups: dict[frozenset, int] = {}
        for ups in per_switch.values():
            groups.setdefault(frozenset(ups), 0)
        uppers = [u for g in groups for u in g]
        assert len(uppers) == len(set(uppers))  # pods are disjoint: peers reach the same set
    summary = result.summary()
    assert summary["switches"]["total"] == len(graph.switches)
    assert summary["cables"]["total"] == len(graph.links)


@SETTINGS
@given(other_options)
def test_torus_and_dragonfly_respect_ports(options):
    result = plan(options)
    if result.graph is None:
        assert result.errors
        return
    assert result.errors == [], result.errors
    _check_ports_and_cables(result.graph)
    assert result.summary()["diameter_switch_hops"] is not None


@settings(max_examples=25, deadline=None, database=None)
@given(st.one_of(tree_options, other_options))
def test_export_import_round_trip(options):
    result = plan(options)
    if result.graph is None:
        return
    graph = result.graph
    back = graph_from_ibnetdiscover(export(graph, "ibnetdiscover")[0], DEFAULT_CATALOGUE)
    assert graph_identity(back) == graph_identity(graph)
    if graph.topology in ("fat-tree", "rail-optimized"):
        assert Counter(s.tier for s in back.switches.values()) == Counter(s.tier for s in graph.switches.values())
    import json

    again = graph_from_dict(json.loads(export(graph, "json")[0]), DEFAULT_CATALOGUE)
    assert graph_identity(again) == graph_identity(graph)
    assert [lk.cable for lk in again.links] == [lk.cable for lk in graph.links]
