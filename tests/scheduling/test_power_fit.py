"""The pure power fit on the engine (no database): which nodes a window may use, which it prefers.

A rail-optimised pool of 2 SUs × 4 nodes with a 300 s boot time per node; with the 120 s margin a
node that is off is ready 420 s after it is asked to boot.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from scheduling.placement import Placement, PlacementEngine, Rejection, Request, rail_optimized
from scheduling.placement.powerfit import NodePower, PowerFit, ready_at
from scheduling.placement.topology import PoolTopology

NOW = 1_000_000_000.0  # an epoch time: explanations print wall-clock UTC


def pool() -> PoolTopology:
    base = rail_optimized(2, nodes_per_su=4, gpus_per_node=8, rails=8)
    nodes = tuple(replace(n, boot_s=300.0) for n in base.nodes)
    return PoolTopology(base.name, nodes, base.groups, base.leaf_spines, base.spines, base.cores)


def place(topology: PoolTopology, fit: PowerFit, nodes: int, start: float, hours: float = 1) -> Placement | Rejection:
    engine = PlacementEngine(topology, now=NOW, preferences=fit.preferences())
    request = Request(nodes=nodes, start=start, end=start + hours * 3600, constraints=fit.filters())
    return engine.preview(request)


def test_ready_times_by_state():
    assert ready_at(300, NodePower("on"), NOW) == NOW
    assert ready_at(300, NodePower("off"), NOW) == NOW + 420
    assert ready_at(300, NodePower("powering-off"), NOW) == NOW + 420
    assert ready_at(300, NodePower("powering-on", NOW - 200), NOW) == NOW + 100 + 120
    assert ready_at(300, NodePower("powering-on", NOW - 900), NOW) == NOW + 120
    assert math.isinf(ready_at(300, NodePower("failed"), NOW))


def test_nodes_that_are_on_are_preferred_over_off_ones_that_would_boot_in_time():
    topology = pool()
    # SU 1's first two nodes are off (the engine's first choice were all on)
    fit = PowerFit(topology, NOW, NOW + 3600, {0: NodePower("off"), 1: NodePower("off")})
    assert fit.excluded == frozenset()
    result = place(topology, fit, 4, NOW + 3600)
    assert isinstance(result, Placement)
    assert set(result.node_ids) == {4, 5, 6, 7}
    # and inside a leaf group the on nodes are taken first
    result = place(topology, fit, 2, NOW + 3600)
    assert isinstance(result, Placement) and not set(result.node_ids) & {0, 1}


def test_off_nodes_fill_a_gang_when_they_boot_before_the_start():
    topology = pool()
    off = {n: NodePower("off") for n in range(6)}
    fit = PowerFit(topology, NOW, NOW + 420, off)
    result = place(topology, fit, 4, NOW + 420)
    assert isinstance(result, Placement)
    note = fit.placement_note(result.node_ids)
    assert note is not None and note["before_start"]
    waiting = sum(1 for n in result.node_ids if n in off)
    assert note["message"].startswith(f"{waiting} of 4 nodes are powered off; they boot in 7 min, before the start")


@pytest.mark.parametrize("lead", [0.0, 419.0])
def test_off_nodes_that_cannot_boot_in_time_are_excluded_and_explained(lead):
    topology = pool()
    fit = PowerFit(topology, NOW, NOW + lead, {n: NodePower("off") for n in range(6)})
    assert fit.excluded == frozenset(range(6))
    result = place(topology, fit, 4, NOW + lead)
    assert isinstance(result, Rejection)
    clause, details = fit.rejection_note()
    assert clause.startswith("6 nodes are off and cannot boot before ")
    assert clause.endswith("(ready in 7 min): excluded (su01-node01, su01-node02, su01-node03 and 3 more)")
    assert len(details["power_excluded_nodes"]) == 6
    assert fit.booted_start() == NOW + 420
    # two nodes that are on still take a 2-node gang
    assert isinstance(place(topology, fit, 2, NOW + lead), Placement)


def test_failed_nodes_are_never_used():
    topology = pool()
    fit = PowerFit(topology, NOW, NOW + 30 * 86400, {n: NodePower("failed") for n in range(7)})
    assert fit.excluded == frozenset(range(7)) and fit.booted_start() is None
    assert isinstance(place(topology, fit, 2, NOW + 30 * 86400), Rejection)
    result = place(topology, fit, 1, NOW + 30 * 86400)
    assert isinstance(result, Placement) and result.node_ids == (7,)
