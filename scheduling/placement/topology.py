"""The placement engine's view of a fabric: nodes, their rails' leaves, leaf groups and pods.

This is the contract between the fabric designer and the scheduler. The designer builds the full
cabling graph; the scheduler only needs to know, for every node, which leaf each of its HCAs sits on
and which nodes share those leaves. Keeping this dataclass small and frozen lets the engine
precompute flat arrays once and keeps placement free of any ORM or graph library.

Vocabulary
----------
* **rail**: HCA ``i`` of a node, serving GPU ``i``. In a rail-optimised scalable unit (SU) every
  node's HCA ``i`` is cabled to the SU's rail-``i`` leaf, so rail-aligned collective traffic
  (GPU ``i`` talking to GPU ``i`` elsewhere) never leaves that leaf inside one SU.
* **leaf group**: the nodes that share the same set of leaves. An SU of 32 nodes in a
  rail-optimised design, or the nodes under one leaf in a plain fat tree. Traffic inside one leaf
  group crosses 0 inter-switch links (node-leaf-node).
* **pod**: in a 3-level tree, the leaf groups that share a spine layer. Across leaf groups in one pod
  traffic climbs leaf-spine-leaf (2 inter-switch hops); across pods it climbs to a core
  (leaf-spine-core-spine-leaf, 4 hops). A 2-level tree is a single pod.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

#: Inter-switch hops for rail-aligned traffic at each level of the tree.
T = TypeVar("T")
#: Derived values one topology keeps (node filter results per combination): plenty for the
#: handful of combinations requests use, small enough to bound memory.
DERIVED_CACHE_SIZE = 256
HOPS_SAME_GROUP = 0
HOPS_SAME_POD = 2
HOPS_CROSS_POD = 4


class NodeState(StrEnum):
    """Operational state of a node; only ``AVAILABLE`` nodes receive new placements."""

    AVAILABLE = "available"
    DRAINING = "draining"
    DOWN = "down"
    OFF = "off"


@dataclass(frozen=True, slots=True)
class TopoNode:
    """One GPU node as the scheduler sees it.

    ``rail_leaves[i]`` is the leaf id HCA ``i`` is cabled to. A rail-optimised DGX node has one
    entry per GPU, each on a different leaf of its SU; a simple node may have a single HCA.
    """

    id: int
    name: str
    gpus: int
    gpu_model: str
    rail_leaves: tuple[int, ...]
    leaf_group: int
    pod: int = 0
    pool: str = "default"
    #: Seconds from power-on to OS up and HCA ports active (the node type's ``boot_s``).
    boot_s: float = 0.0
    #: The site (data centre) of the node's fabric: index into the pool's site list
    #: (:mod:`scheduling.placement.sites`); 0 in a single-site pool.
    site: int = 0


@dataclass(frozen=True, slots=True)
class LeafGroup:
    """Nodes sharing the same leaves; ``leaves[i]`` is the group's rail-``i`` leaf."""

    id: int
    pod: int
    leaves: tuple[int, ...]
    nodes: tuple[int, ...]


@dataclass(frozen=True)
class PoolTopology:
    """A pool's fabric: nodes indexed ``0..n-1``, leaf groups indexed ``0..g-1``, pods.

    ``leaf_spines[leaf]`` lists the spine switches that leaf has uplinks to; it defines the spines a
    multi-group job's traffic may traverse. ``cores`` is the number of core switches joining pods
    (0 in a 2-level tree).
    """

    name: str
    nodes: tuple[TopoNode, ...]
    groups: tuple[LeafGroup, ...]
    leaf_spines: dict[int, tuple[int, ...]]
    spines: int
    cores: int = 0
    # Derived, filled in __post_init__ so that callers never pass inconsistent copies.
    rail_aligned_nodes: frozenset[int] = field(init=False)
    pods: tuple[tuple[int, ...], ...] = field(init=False)
    # What node filters admit depends on the topology alone (NodeFilter's contract), so it is
    # computed once per topology, not once per engine: services build an engine per snapshot.
    _derived: dict[object, object] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for index, node in enumerate(self.nodes):
            if node.id != index:
                raise ValueError(f"node {node.name!r} has id {node.id}, expected index {index}")
            if not 0 <= node.leaf_group < len(self.groups):
                raise ValueError(f"node {node.name!r} refers to unknown leaf group {node.leaf_group}")
            if node.gpus < 1 or node.gpus > 62:
                # GPU sets are bit masks in a Python int; 62 keeps them small ints.
                raise ValueError(f"node {node.name!r} has {node.gpus} GPUs (1..62 supported)")
        for index, group in enumerate(self.groups):
            if group.id != index:
                raise ValueError(f"leaf group {group.id} is at index {index}")
            for node_id in group.nodes:
                if self.nodes[node_id].leaf_group != index:
                    raise ValueError(f"node {node_id} listed in group {index} but says otherwise")
        aligned = frozenset(n.id for n in self.nodes if _is_rail_aligned(n, self.groups))
        object.__setattr__(self, "rail_aligned_nodes", aligned)
        pod_count = max((g.pod for g in self.groups), default=-1) + 1
        pods = tuple(tuple(g.id for g in self.groups if g.pod == p) for p in range(pod_count))
        object.__setattr__(self, "pods", pods)
        object.__setattr__(self, "_derived", {})

    def derived(self, key: object, compute: Callable[[], T]) -> T:
        """``compute()``, once per ``key`` for this topology (a bounded cache: filters whose identity
        carries changing state, e.g. a set of powered-off nodes, must not grow it without end)."""
        cache = self._derived
        if key in cache:
            return cache[key]  # type: ignore[return-value]  # stored by the same key's compute
        value = compute()
        if len(cache) >= DERIVED_CACHE_SIZE:
            cache.clear()
        cache[key] = value
        return value

    @property
    def total_gpus(self) -> int:
        """All GPUs of the pool, whatever their state."""
        return sum(n.gpus for n in self.nodes)

    def hops_between_groups(self, group_a: int, group_b: int) -> int:
        """Inter-switch hops of rail-aligned traffic between two leaf groups."""
        if group_a == group_b:
            return HOPS_SAME_GROUP
        if self.groups[group_a].pod == self.groups[group_b].pod:
            return HOPS_SAME_POD
        return HOPS_CROSS_POD

    def spines_for_leaves(self, leaves: set[int] | frozenset[int]) -> frozenset[int]:
        """Spines a job spread over ``leaves`` may traverse (the union of their uplinks)."""
        spines: set[int] = set()
        for leaf in leaves:
            spines.update(self.leaf_spines.get(leaf, ()))
        return frozenset(spines)


def _is_rail_aligned(node: TopoNode, groups: tuple[LeafGroup, ...]) -> bool:
    # Aligned means one HCA per GPU and HCA i on the group's rail-i leaf: a node with fewer HCAs,
    # or one cabled to the wrong rail, forces GPU i's traffic across rails (and through a spine).
    group = groups[node.leaf_group]
    return len(node.rail_leaves) == node.gpus and node.rail_leaves == group.leaves[: node.gpus]


def rail_optimized(
    sus: int,
    nodes_per_su: int = 32,
    gpus_per_node: int = 8,
    rails: int = 8,
    spines: int | None = None,
    *,
    gpu_model: str = "H100",
    miswired_nodes: tuple[int, ...] = (),
    sus_per_pod: int | None = None,
    name: str = "",
) -> PoolTopology:
    """A rail-optimised fabric as in NVIDIA's DGX SuperPOD (one leaf per rail per SU).

    Every leaf sends one link per node up; with the default spine count (``sus * rails / 2``,
    i.e. 4 spines per SU as in the published rows: 1 SU → 4, 8 SUs → 32) every leaf connects to
    every spine of its pod. Without ``sus_per_pod`` the fabric is one 2-level pod; with it, SUs
    are grouped in pods of that many SUs, each with its own spines (``spines`` is then per pod),
    joined by a core layer: the 3-level shape beyond 2,048 endpoints of 64-port switches.
    ``miswired_nodes`` swap rails 0 and 1 on those nodes, modelling a cabling error the
    placement must steer around when rail alignment is asked for.
    """
    if sus < 1 or nodes_per_su < 1 or rails < 1:
        raise ValueError("sus, nodes_per_su and rails must be positive")
    per_pod = sus_per_pod or sus
    pod_spines = spines if spines is not None else max(1, per_pod * rails // 2)
    pod_count = -(-sus // per_pod)
    nodes: list[TopoNode] = []
    groups: list[LeafGroup] = []
    miswired = set(miswired_nodes)
    for su in range(sus):
        leaves = tuple(su * rails + r for r in range(rails))
        members: list[int] = []
        for slot in range(nodes_per_su):
            node_id = su * nodes_per_su + slot
            rail_leaves = leaves
            if node_id in miswired and rails >= 2:
                rail_leaves = (leaves[1], leaves[0], *leaves[2:])
            nodes.append(
                TopoNode(
                    id=node_id,
                    name=f"su{su + 1:02d}-node{slot + 1:02d}",
                    gpus=gpus_per_node,
                    gpu_model=gpu_model,
                    rail_leaves=rail_leaves,
                    leaf_group=su,
                    pod=su // per_pod,
                )
            )
            members.append(node_id)
        groups.append(LeafGroup(id=su, pod=su // per_pod, leaves=leaves, nodes=tuple(members)))
    leaf_spines = {
        leaf: tuple(range((leaf // rails // per_pod) * pod_spines, (leaf // rails // per_pod + 1) * pod_spines))
        for leaf in range(sus * rails)
    }
    return PoolTopology(
        name=name or f"rail-optimised {sus} SU x {nodes_per_su} nodes",
        nodes=tuple(nodes),
        groups=tuple(groups),
        leaf_spines=leaf_spines,
        spines=pod_spines * pod_count,
        cores=pod_spines if pod_count > 1 else 0,
    )


def fat_tree(
    nodes: int,
    nodes_per_leaf: int,
    leaves_per_pod: int | None = None,
    *,
    gpus_per_node: int = 8,
    hcas_per_node: int = 1,
    spines_per_pod: int | None = None,
    cores: int | None = None,
    gpu_model: str = "H100",
    name: str = "",
) -> PoolTopology:
    """A plain fat tree: each node's HCAs all on one leaf; 3 levels when ``leaves_per_pod`` is set.

    Each leaf is its own leaf group. In 2 levels every leaf reaches every spine; in 3 levels a
    leaf reaches its pod's spines only and pods are joined by ``cores`` core switches.
    """
    if nodes < 1 or nodes_per_leaf < 1:
        raise ValueError("nodes and nodes_per_leaf must be positive")
    leaf_count = -(-nodes // nodes_per_leaf)
    per_pod = leaves_per_pod or leaf_count
    pod_count = -(-leaf_count // per_pod)
    spine_per_pod = spines_per_pod if spines_per_pod is not None else max(1, per_pod // 2)
    node_list: list[TopoNode] = []
    groups: list[LeafGroup] = []
    leaf_spines: dict[int, tuple[int, ...]] = {}
    for leaf in range(leaf_count):
        pod = leaf // per_pod
        members = tuple(range(leaf * nodes_per_leaf, min(nodes, (leaf + 1) * nodes_per_leaf)))
        for node_id in members:
            node_list.append(
                TopoNode(
                    id=node_id,
                    name=f"leaf{leaf + 1:03d}-node{node_id - members[0] + 1:02d}",
                    gpus=gpus_per_node,
                    gpu_model=gpu_model,
                    rail_leaves=(leaf,) * hcas_per_node,
                    leaf_group=leaf,
                    pod=pod,
                )
            )
        groups.append(LeafGroup(id=leaf, pod=pod, leaves=(leaf,) * hcas_per_node, nodes=members))
        leaf_spines[leaf] = tuple(range(pod * spine_per_pod, (pod + 1) * spine_per_pod))
    if pod_count > 1:
        core_count = cores if cores is not None else spine_per_pod
    else:
        core_count = 0
    return PoolTopology(
        name=name or f"fat tree {nodes} nodes, {nodes_per_leaf} per leaf",
        nodes=tuple(node_list),
        groups=tuple(groups),
        leaf_spines=leaf_spines,
        spines=spine_per_pod * pod_count,
        cores=core_count,
    )
