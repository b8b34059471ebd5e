"""Shared helpers for the designer tests (pure Python: no database, no Django)."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from designer.builtin_catalogue import default_catalogue
from designer.graph import FabricGraph
from designer.plan import plan


@pytest.fixture
def catalogue():
    return default_catalogue()


@pytest.fixture
def one_su(catalogue):
    """[8 DGX-H100 rails] --node_leaf-- [8 rail leaves] --leaf_spine-- [4 spines]"""
    result = plan({"topology": "rail-optimized", "gpus": 256}, catalogue)
    assert result.ok, result.errors
    return result.graph


def ports_used(graph: FabricGraph) -> Counter:
    used: Counter = Counter()
    for lk in graph.links:
        used[(lk.a, lk.a_port)] += 1
        used[(lk.b, lk.b_port)] += 1
    return used


def links_between(graph: FabricGraph, lower: str, upper: str) -> dict[str, Counter]:
    """switch of tier `lower` → Counter(switch of tier `upper` → links)."""
    out: dict[str, Counter] = defaultdict(Counter)
    tiers = {n: s.tier for n, s in graph.switches.items()}
    for lk in graph.links:
        if tiers.get(lk.a) == lower and tiers.get(lk.b) == upper:
            out[lk.a][lk.b] += 1
        elif tiers.get(lk.b) == lower and tiers.get(lk.a) == upper:
            out[lk.b][lk.a] += 1
    return out


def graph_identity(graph: FabricGraph) -> tuple:
    return (
        {(s.name, s.guid, s.model) for s in graph.switches.values()},
        {(n.name, n.ca_guids, n.port_guids) for n in graph.nodes.values()},
        {lk.key() for lk in graph.links},
    )
