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

from django.db.models import Exists, F, OuterRef, Q, QuerySet

from console.fabric.models import Fabric
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
    #: Fabric pk per node id (filled for pools): the subnets a placement touches.
    node_fabric: tuple[int, ...] = ()
    #: Site index (``TopoNode.site``) → the site's slug; ``""`` for a fabric without a site.
    site_slugs: tuple[str, ...] = ()

    def fabrics_of(self, placement: Placement) -> list[int]:
        """The fabrics (pks) of a placement's nodes, the one holding most nodes first."""
        counts = Counter(self.node_fabric[n] for n in placement.node_ids)
        return [fabric for fabric, _ in counts.most_common()]

    def sites_of(self, placement: Placement) -> list[int]:
        """The site indexes of a placement's nodes, the one holding most nodes first."""
        counts = Counter(self.topology.nodes[n].site for n in placement.node_ids)
        return [site for site, _ in counts.most_common()]

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
        return (
            {
                "nodes": [self.node_names[n] for n in placement.node_ids],
                "gpu_indices": [list(g) for g in placement.gpu_indices],
                "leaf_groups": [self.group_names[g] for g in placement.leaf_groups],
                "leaves": [self.leaf_names[leaf] for leaf in placement.leaves],
                "spines": [self.spine_names[s] for s in placement.spines],
                "rail_aligned": placement.rail_aligned,
                "max_switch_hops": placement.max_hops,
                "score": placement.score,
            }
            | ({"sharp": [self.switch_name(k) for k in placement.sharp]} if placement.sharp else {})
            | ({"sites": [self.site_slugs[s] for s in self.sites_of(placement)]} if len(self.site_slugs) > 1 else {})
        )


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


@dataclass(frozen=True, slots=True)
class FabricPart:
    """One fabric's share of a multi-fabric pool: its topology (ids from 0), its pk, its name
    (qualifies names two fabrics share) and its site index in the pool's site list."""

    named: NamedTopology
    fabric: int
    fabric_name: str
    site: int


def merge_topologies(name: str, parts: Sequence[FabricPart], site_slugs: Sequence[str]) -> NamedTopology:
    """One topology of several fabrics' parts: their nodes, leaf groups, leaves, spines, pods and
    cores side by side, none shared (two subnets share no switch), each node with its site.

    A name found in more than one fabric (``node-001`` of two generated designs) is shown as
    ``<fabric>/<name>``; names unique in the pool stay as they are.
    """
    nodes: list[TopoNode] = []
    groups: list[LeafGroup] = []
    leaf_spines: dict[int, tuple[int, ...]] = {}
    names: dict[str, list[str]] = {"node": [], "leaf": [], "spine": [], "group": [], "core": []}
    node_pks: list[int] = []
    node_fabric: list[int] = []
    gpu_pks: dict[tuple[int, int], int] = {}
    sharp: dict[str, int] = {}
    spines = cores = pods = 0
    seen = Counter(
        n
        for part in parts
        for n in {
            *part.named.node_names,
            *part.named.leaf_names,
            *part.named.spine_names,
            *part.named.group_names,
            *part.named.core_names,
        }
    )
    for part in parts:
        named, topo = part.named, part.named.topology
        node0, group0, leaf0 = len(nodes), len(groups), len(names["leaf"])
        spine0, core0, pod0 = spines, cores, pods
        for node in topo.nodes:
            nodes.append(
                replace(
                    node,
                    id=node0 + node.id,
                    rail_leaves=tuple(leaf0 + leaf for leaf in node.rail_leaves),
                    leaf_group=group0 + node.leaf_group,
                    pod=pod0 + node.pod,
                    site=part.site,
                )
            )
        for group in topo.groups:
            groups.append(
                LeafGroup(
                    id=group0 + group.id,
                    pod=pod0 + group.pod,
                    leaves=tuple(leaf0 + leaf for leaf in group.leaves),
                    nodes=tuple(node0 + n for n in group.nodes),
                )
            )
        leaf_spines.update({leaf0 + leaf: tuple(spine0 + s for s in up) for leaf, up in topo.leaf_spines.items()})
        for kind, own in (
            ("node", named.node_names),
            ("leaf", named.leaf_names),
            ("spine", named.spine_names),
            ("group", named.group_names),
            ("core", named.core_names),
        ):
            names[kind] += [f"{part.fabric_name}/{n}" if seen[n] > 1 else n for n in own]
        node_pks += named.node_pks
        node_fabric += [part.fabric] * len(topo.nodes)
        gpu_pks.update({(node0 + n, index): pk for (n, index), pk in named.gpu_pks.items()})
        offsets = {"leaf": leaf0, "spine": spine0, "core": core0}
        for key, trees in named.sharp_trees.items():
            kind = key.rstrip("0123456789")
            sharp[f"{kind}{offsets[kind] + int(key[len(kind) :])}"] = trees
        spines += topo.spines
        cores += topo.cores
        pods += len(topo.pods)
    topology = PoolTopology(
        name=name, nodes=tuple(nodes), groups=tuple(groups), leaf_spines=leaf_spines, spines=spines, cores=cores
    )
    return NamedTopology(
        topology,
        tuple(names["node"]),
        tuple(names["leaf"]),
        tuple(names["spine"]),
        tuple(names["group"]),
        node_pks=tuple(node_pks),
        gpu_pks=gpu_pks,
        core_names=tuple(names["core"]),
        sharp_trees=sharp,
        node_fabric=tuple(node_fabric),
        site_slugs=tuple(site_slugs),
    )


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


def annotated_pools() -> QuerySet[Pool]:
    """Pools with their fabric, the design revision's time (``revised``) and whether any member
    is on another fabric (``foreign``): what :func:`pool_topology` needs, read with the pool."""
    others = Node.objects.filter(pools=OuterRef("pk")).exclude(fabric_id=OuterRef("fabric_id"))
    return Pool.objects.select_related("fabric").annotate(
        revised=F("fabric__revision__created_at"), foreign=Exists(others), home_site=F("fabric__site__slug")
    )


def pool_topology(pool: Pool) -> NamedTopology:
    """The engine's topology of ``pool`` with inventory keys (cached; see module docstring).

    A pool whose nodes are on several fabrics (sites) is each fabric's topology side by side
    (:func:`merge_topologies`); its cache key holds every fabric's revision and site."""
    fabric = pool.fabric
    read = pool if hasattr(pool, "foreign") else annotated_pools().get(pk=pool.pk)  # read with it: annotated_pools
    revised, foreign, site = (getattr(read, name) for name in ("revised", "foreign", "home_site"))
    if foreign:
        return _multi_fabric_topology(pool)
    key = (pool.pk, pool.created_at, pool.version, fabric.revision_id, revised, site)
    cached = _topologies.get(key)
    if cached is not None:
        return cached
    shape = shape_of_revision(fabric.revision_id, revised)
    nodes = list(Node.objects.filter(pools=pool).order_by("pk"))
    named = _fabric_topology(pool.name, nodes, _leaves_of(nodes), shape)
    named = replace(named, node_fabric=(fabric.pk,) * len(named.node_pks), site_slugs=(site or "",))
    return _remember(_topologies, key, named)


def _leaves_of(nodes: list[Node]) -> dict[int, list[str]]:
    leaves: dict[int, list[str]] = {n.pk: [] for n in nodes}
    for node_id, leaf in HCA.objects.filter(node__in=nodes).order_by("node", "index").values_list("node_id", "leaf"):
        leaves[node_id].append(leaf)
    return leaves


def _fabric_topology(name: str, nodes: list[Node], leaves: dict[int, list[str]], shape: FabricShape) -> NamedTopology:
    """One fabric's nodes (names unique within it) as a topology with inventory keys."""
    specs = [
        NodeSpec(n.name, n.gpus, n.gpu_model, n.su, tuple(leaves[n.pk]), boot_of(shape, n.node_type)) for n in nodes
    ]
    named = build_topology(name, specs, shape)
    pk_of_name = {n.name: n.pk for n in nodes}
    node_pks = tuple(pk_of_name[name] for name in named.node_names)
    index_of_pk = {pk: i for i, pk in enumerate(node_pks)}
    gpu_pks = {
        (index_of_pk[node_id], index): pk
        for pk, node_id, index in GPU.objects.filter(node__in=nodes).values_list("pk", "node_id", "index")
    }
    return replace(named, node_pks=node_pks, gpu_pks=gpu_pks)


def _multi_fabric_topology(pool: Pool) -> NamedTopology:
    """A pool with nodes on several fabrics: one part per fabric (the home fabric first, then by
    pk), sites indexed in the same order (a fabric without a site is a site of its own)."""
    rows = list(
        Fabric.objects.filter(Q(pk=pool.fabric_id) | Q(nodes__pools=pool))
        .distinct()
        .order_by("pk")
        .values_list("pk", "name", "revision_id", "revision__created_at", "site_id", "site__slug")
    )
    rows.sort(key=lambda r: (r[0] != pool.fabric_id, r[0]))
    key = (pool.pk, pool.created_at, pool.version, tuple(rows))
    cached = _topologies.get(key)
    if cached is not None:
        return cached
    members = list(Node.objects.filter(pools=pool).order_by("pk"))
    leaves = _leaves_of(members)
    site_index: dict[tuple[str, int], int] = {}
    slugs: list[str] = []
    parts = []
    for fabric_pk, fabric_name, revision_id, revised, site_id, slug in rows:
        nodes = [n for n in members if n.fabric_id == fabric_pk]
        if not nodes:
            continue
        where = ("site", site_id) if site_id is not None else ("fabric", fabric_pk)
        if where not in site_index:
            site_index[where] = len(slugs)
            slugs.append(slug or "")
        named = _fabric_topology(pool.name, nodes, leaves, shape_of_revision(revision_id, revised))
        parts.append(FabricPart(named, fabric_pk, fabric_name, site_index[where]))
    return _remember(_topologies, key, merge_topologies(pool.name, parts, slugs))


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
