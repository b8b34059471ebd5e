"""From a designed fabric to the placement engine's :class:`PoolTopology`, and back to names.

The pure part (:func:`fabric_shape`, :func:`specs_from_graph`, :func:`build_topology`) turns a
designer graph, or inventory rows, into the engine's plain topology: one leaf per rail taken from
the node-leaf links, leaf groups = scalable units (or nodes sharing the same leaves in a plain
fat tree), spines and pods from the leaf-spine links. The replay CLI uses it on a planned graph.

The Django part (:func:`pool_topology`) builds a pool's topology from its inventory rows once
and caches it by (pool, membership version, design revision): revisions are immutable and every
membership change bumps ``Pool.version``, so a cached entry can never be stale. Rows are keyed
with their creation times too: SQLite hands a deleted row's primary key to the next insert, and
a new pool or revision under a recycled key must not find the old one's entry.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from designer.graph import FabricGraph
from designer.models import DesignRevision
from designer.services import revision_graph
from scheduling.models import GPU, HCA, Node, Pool
from scheduling.placement import LeafGroup, Placement, PoolTopology, TopoNode


@dataclass(frozen=True, slots=True)
class FabricShape:
    """The switch side of a design, by switch name: which spines each leaf uplinks to."""

    leaf_spines: dict[str, tuple[str, ...]]
    spine_pod: dict[str, int]
    spines: tuple[str, ...]
    cores: int
    #: Boot time (seconds) per node type name, from the design's catalogue.
    boot_s: dict[str, float] = field(default_factory=dict)
    #: Core switch names, sorted (core ``k`` of the engine is the ``k``-th).
    core_names: tuple[str, ...] = ()
    #: SHARP aggregation trees per switch name (the catalogue's ``sharp_trees`` of its model; >0 only).
    sharp_trees: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node as placement needs it: ``leaves[i]`` is the leaf its HCA ``i`` is cabled to."""

    name: str
    gpus: int
    gpu_model: str
    su: int
    leaves: tuple[str, ...]
    boot_s: float = 0.0


@dataclass(frozen=True)
class NamedTopology:
    """A :class:`PoolTopology` plus the names behind its integer ids."""

    topology: PoolTopology
    node_names: tuple[str, ...]
    leaf_names: tuple[str, ...]
    spine_names: tuple[str, ...]
    group_names: tuple[str, ...]
    # Inventory keys (filled for pools): node pk per node id, GPU pk per (node id, GPU index).
    node_pks: tuple[int, ...] = ()
    gpu_pks: dict[tuple[int, int], int] = field(default_factory=dict)
    core_names: tuple[str, ...] = ()
    #: SHARP trees per switch by the engine's key (``leaf3``: :mod:`scheduling.placement.sharp`).
    sharp_trees: dict[str, int] = field(default_factory=dict)
    #: Fabric pk per engine node id (filled for pools: the fabric of each node's inventory row).
    node_fabric: tuple[int, ...] = ()
    #: Site index (``TopoNode.site``) → site slug; ``""`` for a fabric without a site.
    site_slugs: tuple[str, ...] = ()

    def switch_name(self, key: str) -> str:
        """The design's name of the engine's switch ``key`` (``leaf3`` → the fourth leaf's name)."""
        kind = key.rstrip("0123456789")
        names = {"leaf": self.leaf_names, "spine": self.spine_names, "core": self.core_names}[kind]
        return names[int(key[len(kind) :])]

    def switch_keys(self) -> dict[str, str]:
        """Design switch name → the engine's key, for every leaf, spine and core."""
        out = {name: f"leaf{i}" for i, name in enumerate(self.leaf_names)}
        out.update({name: f"spine{i}" for i, name in enumerate(self.spine_names)})
        out.update({name: f"core{i}" for i, name in enumerate(self.core_names)})
        return out

    def describe(self, placement: Placement) -> dict[str, Any]:
        """A placement in names: nodes, GPUs per node, leaf groups, leaves, spines."""
        return {
            "nodes": [self.node_names[n] for n in placement.node_ids],
            "gpu_indices": [list(g) for g in placement.gpu_indices],
            "leaf_groups": [self.group_names[g] for g in placement.leaf_groups],
            "leaves": [self.leaf_names[leaf] for leaf in placement.leaves],
            "spines": [self.spine_names[s] for s in placement.spines],
            "rail_aligned": placement.rail_aligned,
            "max_switch_hops": placement.max_hops,
            "score": placement.score,
        } | ({"sharp": [self.switch_name(k) for k in placement.sharp]} if placement.sharp else {})


def fabric_shape(graph: FabricGraph) -> FabricShape:
    """Leaf → spines (from leaf-spine links) and each spine's pod (0 in a 2-level tree)."""
    uplinks: dict[str, set[str]] = {}
    for link in graph.links:
        if link.tier != "leaf_spine":
            continue
        a, b = graph.switches.get(link.a), graph.switches.get(link.b)
        if a is None or b is None:
            continue
        leaf, spine = (a, b) if a.tier == "leaf" else (b, a)
        uplinks.setdefault(leaf.name, set()).add(spine.name)
    spines = tuple(sorted(n for n, s in graph.switches.items() if s.tier == "spine"))
    core_names = tuple(sorted(n for n, s in graph.switches.items() if s.tier == "core"))
    # An imported fabric lists the switches discovery found an Aggregation Node in: only they serve trees.
    discovered = graph.meta.get("sharp")
    trees = {}
    for name, switch in graph.switches.items():
        model = graph.catalogue.switches.get(switch.model)
        if model is not None and model.sharp_trees > 0 and (discovered is None or name in discovered):
            trees[name] = model.sharp_trees
    return FabricShape(
        leaf_spines={leaf: tuple(sorted(s)) for leaf, s in uplinks.items()},
        spine_pod={n: max(0, graph.switches[n].pod) for n in spines},
        spines=spines,
        cores=len(core_names),
        boot_s={name: float(t.boot_s) for name, t in graph.catalogue.nodes.items()},
        core_names=core_names,
        sharp_trees=trees,
    )


def specs_from_graph(graph: FabricGraph) -> list[NodeSpec]:
    """Compute nodes with GPUs, in graph order, with the leaf behind each of their ports."""
    specs = []
    for node in graph.nodes.values():
        if node.role != "compute" or node.gpus < 1:
            continue
        node_type = graph.catalogue.nodes.get(node.node_type)
        leaves = []
        for port in range(1, node.hcas + 1):
            link = graph.link_at(node.name, port)
            if link is None:
                leaves.append("")
                continue
            leaves.append(link.b if link.a == node.name else link.a)
        specs.append(
            NodeSpec(
                name=node.name,
                gpus=node.gpus,
                gpu_model=node_type.gpu_model if node_type and node_type.gpu_model else "",
                su=node.su,
                leaves=tuple(leaves),
                boot_s=float(node_type.boot_s) if node_type else 0.0,
            )
        )
    return specs


def build_topology(name: str, specs: Sequence[NodeSpec], shape: FabricShape) -> NamedTopology:
    """The engine's topology for ``specs``; node ids follow leaf groups, then input order."""
    # ("su", number) or ("leaves", the leaves a plain fat tree's nodes share)
    groups: dict[tuple[str, int | tuple[str, ...]], list[int]] = {}
    for index, spec in enumerate(specs):
        key: tuple[str, int | tuple[str, ...]] = (
            ("su", spec.su) if spec.su >= 0 else ("leaves", tuple(sorted(set(spec.leaves))))
        )
        groups.setdefault(key, []).append(index)
    ordered_keys = sorted(groups, key=lambda k: (k[0], k[1]))
    leaf_ids: dict[str, int] = {}
    spine_ids = {s: i for i, s in enumerate(shape.spines)}

    def leaf_id(leaf: str) -> int:
        return leaf_ids.setdefault(leaf, len(leaf_ids))

    nodes: list[TopoNode] = []
    leaf_groups: list[LeafGroup] = []
    group_names: list[str] = []
    node_names: list[str] = []
    order: list[int] = []
    pod_ids: dict[int, int] = {}
    for gid, key in enumerate(ordered_keys):
        members = groups[key]
        width = max(len(specs[i].leaves) for i in members)
        # The group's rail-i leaf: the leaf most of its nodes' HCA i reaches (a miswired node
        # then shows up as not rail-aligned instead of redefining the rail).
        rail_leaves = tuple(
            leaf_id(Counter(specs[i].leaves[r] for i in members if len(specs[i].leaves) > r).most_common(1)[0][0])
            for r in range(width)
        )
        first_leaf = next((specs[i].leaves[0] for i in members if specs[i].leaves), "")
        spine_pods = [shape.spine_pod.get(s, 0) for s in shape.leaf_spines.get(first_leaf, ())]
        pod = pod_ids.setdefault(min(spine_pods, default=0), len(pod_ids))
        ids = []
        for i in members:
            spec = specs[i]
            node_id = len(nodes)
            nodes.append(
                TopoNode(
                    id=node_id,
                    name=spec.name,
                    gpus=spec.gpus,
                    gpu_model=spec.gpu_model,
                    rail_leaves=tuple(leaf_id(leaf) for leaf in spec.leaves),
                    leaf_group=gid,
                    pod=pod,
                    boot_s=spec.boot_s,
                )
            )
            node_names.append(spec.name)
            order.append(i)
            ids.append(node_id)
        leaf_groups.append(LeafGroup(id=gid, pod=pod, leaves=rail_leaves, nodes=tuple(ids)))
        label = key[1]
        group_names.append(f"su{label + 1:02d}" if isinstance(label, int) else "+".join(label))
    leaf_spines = {
        lid: tuple(spine_ids[s] for s in shape.leaf_spines.get(leaf, ()) if s in spine_ids)
        for leaf, lid in leaf_ids.items()
    }
    topology = PoolTopology(
        name=name,
        nodes=tuple(nodes),
        groups=tuple(leaf_groups),
        leaf_spines=leaf_spines,
        spines=len(shape.spines),
        cores=shape.cores,
    )
    leaf_names = tuple(sorted(leaf_ids, key=leaf_ids.__getitem__))
    named = NamedTopology(
        topology, tuple(node_names), leaf_names, shape.spines, tuple(group_names), core_names=shape.core_names
    )
    keys = named.switch_keys()
    return replace(named, sharp_trees={keys[n]: trees for n, trees in shape.sharp_trees.items() if n in keys})


def topology_from_graph(graph: FabricGraph, name: str = "") -> NamedTopology:
    """The whole designed fabric as one pool (the replay simulator's view)."""
    return build_topology(name or graph.meta.get("name", "fabric"), specs_from_graph(graph), fabric_shape(graph))


# ------------------------------------------------------------------ Django: pools, cached

_CACHE_SIZE = 32
#: Boot time assumed for a node whose type the catalogue does not know (the catalogue's default).
DEFAULT_BOOT_S = 300.0
_K = TypeVar("_K")
_V = TypeVar("_V")
_lock = threading.Lock()
_shapes: OrderedDict[tuple[int, object], FabricShape] = OrderedDict()
_topologies: OrderedDict[tuple[object, ...], NamedTopology] = OrderedDict()


def _remember(cache: OrderedDict[_K, _V], key: _K, value: _V) -> _V:
    with _lock:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
    return value


def shape_of_revision(revision_id: int, created_at: object) -> FabricShape:
    """:func:`fabric_shape` of a design revision, cached (revisions are immutable)."""
    key = (revision_id, created_at)
    cached = _shapes.get(key)
    if cached is not None:
        return cached
    graph = revision_graph(DesignRevision.objects.get(pk=revision_id))
    return _remember(_shapes, key, fabric_shape(graph))


def pool_topology(pool: Pool) -> NamedTopology:
    """The engine's topology of ``pool`` with inventory keys (cached; see module docstring)."""
    fabric = pool.fabric
    if hasattr(pool, "revised"):  # read with the pool (:func:`.decision.pool_of`)
        revised = getattr(pool, "revised")  # noqa: B009 - an annotation, not a field
    else:
        revised = DesignRevision.objects.filter(pk=fabric.revision_id).values_list("created_at", flat=True).first()
    key = (pool.pk, pool.created_at, pool.version, fabric.revision_id, revised)
    cached = _topologies.get(key)
    if cached is not None:
        return cached
    shape = shape_of_revision(fabric.revision_id, revised)
    nodes = list(Node.objects.filter(pools=pool).order_by("pk"))
    leaves: dict[int, list[str]] = {n.pk: [] for n in nodes}
    for node_id, leaf in HCA.objects.filter(node__in=nodes).order_by("node", "index").values_list("node_id", "leaf"):
        leaves[node_id].append(leaf)
    specs = [
        NodeSpec(n.name, n.gpus, n.gpu_model, n.su, tuple(leaves[n.pk]), boot_of(shape, n.node_type)) for n in nodes
    ]
    named = build_topology(pool.name, specs, shape)
    pk_of_name = {n.name: n.pk for n in nodes}
    node_pks = tuple(pk_of_name[name] for name in named.node_names)
    fabric_of_name = {n.name: n.fabric_id for n in nodes}
    node_fabric = tuple(fabric_of_name[name] for name in named.node_names)
    index_of_pk = {pk: i for i, pk in enumerate(node_pks)}
    gpu_pks = {
        (index_of_pk[node_id], index): pk
        for pk, node_id, index in GPU.objects.filter(node__in=nodes).values_list("pk", "node_id", "index")
    }
    named = replace(named, node_pks=node_pks, gpu_pks=gpu_pks, node_fabric=node_fabric)
    return _remember(_topologies, key, named)


def boot_of(shape: FabricShape, node_type: str) -> float:
    """Boot seconds of a node type (any spelling); the catalogue's default for unknown types."""
    found = shape.boot_s.get(node_type)
    if found is None:
        folded = node_type.casefold()
        found = next((b for name, b in shape.boot_s.items() if name.casefold() == folded), None)
    return found if found is not None else DEFAULT_BOOT_S


def topology_for_pool(pool: Pool) -> PoolTopology:
    """The placement engine's :class:`PoolTopology` of a pool."""
    return pool_topology(pool).topology
