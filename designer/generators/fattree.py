"""Fat trees (1, 2 or 3 levels) and rail-optimised scalable units (DGX SuperPOD style).

Both share `_wire_tree`: leaves send their uplinks from their top ports, spread evenly over
every spine of their pod (the ftree symmetry rule, see `designer.sizing`), and spines of the
same plane in every pod connect evenly to their core group.
"""

from __future__ import annotations

from dataclasses import asdict

from designer.catalogue import Catalogue
from designer.errors import Issue, PlanError
from designer.generators.common import Builder, width
from designer.graph import FabricGraph, Link
from designer.layout import Cell, FloorPlan, alternate_row, assign_cables, row_width
from designer.options import ResolvedOptions
from designer.sizing import TreeShape, fixed_leaves_shape, leaf_split, tree_shape

LEAVES_PER_ROW = 8


def _wire_tree(b: Builder, shape: TreeShape, leaves: list[str], ports: int) -> list[str]:
    """Create spines and cores above `leaves` and cable them; returns the central switches."""
    links = b.links
    up = shape.leaf_up
    per_pair = shape.leaf_spine_links
    leaf_base = ports - up + 1
    if shape.levels == 2:
        ws = width(shape.spines)
        spines = [b.switch(f"spine-{j + 1:0{ws}d}", "spine", index=j) for j in range(shape.spines)]
        for li, leaf in enumerate(leaves):
            port = leaf_base
            first = li * per_pair + 1
            for spine in spines:
                for r in range(per_pair):
                    links.append(Link(leaf, port, spine, first + r, "leaf_spine"))
                    port += 1
        return spines
    per_pod = shape.leaves_per_pod
    cores_per_group = shape.cores_per_group
    per_core = shape.spine_core_links
    spine_base = ports - shape.spine_up + 1
    wc = width(shape.cores, 3)
    cores = [b.switch(f"core-{c + 1:0{wc}d}", "core", index=c) for c in range(shape.cores)]
    wp = width(shape.pods)
    central: list[str] = []
    switches = b.graph.switches
    for pod in range(shape.pods):
        pod_leaves = leaves[pod * per_pod : (pod + 1) * per_pod]
        spines = [
            b.switch(f"pod{pod + 1:0{wp}d}-spine-{s + 1:02d}", "spine", pod=pod, index=s)
            for s in range(shape.spines_per_pod)
        ]
        central.extend(spines)
        for li, leaf in enumerate(pod_leaves):
            switches[leaf].pod = pod
            port = leaf_base
            first = li * per_pair + 1
            for spine in spines:
                for r in range(per_pair):
                    links.append(Link(leaf, port, spine, first + r, "leaf_spine"))
                    port += 1
        first = pod * per_core + 1
        for plane, spine in enumerate(spines):
            port = spine_base
            group = cores[plane * cores_per_group : (plane + 1) * cores_per_group]
            for core in group:
                for r in range(per_core):
                    links.append(Link(spine, port, core, first + r, "spine_core"))
                    port += 1
    return central + cores


def _tree_meta(graph: FabricGraph, ro: ResolvedOptions, shape: TreeShape, **extra: object) -> None:
    graph.meta.update(
        levels=shape.levels,
        routing="ftree" if shape.levels > 1 else "minhop",
        oversubscription=f"{ro.down}:{ro.up}",
        shape={k: v for k, v in asdict(shape).items() if k != "steps"},
        steps=list(shape.steps),
        options=ro.options.as_dict(),
        **extra,
    )


def _layout(b: Builder, rows: list[tuple[list[str], list[str]]], central: list[str]) -> None:
    graph = b.graph
    plan = FloorPlan(graph)
    central_width = plan.central_row(central)
    node_type = b.ro.node_type.name
    for i, (nodes, leaves) in enumerate(rows):
        wide = row_width(graph, len(nodes), node_type, len(leaves))
        plan.row(alternate_row(i), [Cell(nodes, [])], leaves, (central_width - wide) // 2)
    assign_cables(graph)


def build_fat_tree(ro: ResolvedOptions, catalogue: Catalogue) -> FabricGraph:
    """A fat tree of the fewest switches for the endpoints, levels auto or forced."""
    ports = ro.ports
    shape = tree_shape(ro.endpoints, ports, ro.down, ro.up, ro.levels, ro.switch.name)
    b = Builder(ro, catalogue, "fat-tree")
    wn = width(ro.nodes, 3)
    nodes = [
        b.node(f"node-{i + 1:0{wn}d}", ro.node_type, gpus=ro.gpus_per_node, hcas=ro.hcas_per_node)
        for i in range(ro.nodes)
    ]
    if shape.levels == 3:
        wp, wl = width(shape.pods), width(shape.leaves_per_pod)
        per_pod = shape.leaves_per_pod
        leaves = [
            b.switch(
                f"pod{i // per_pod + 1:0{wp}d}-leaf-{i % per_pod + 1:0{wl}d}",
                "leaf",
                pod=i // per_pod,
                index=i % per_pod,
            )
            for i in range(shape.leaves)
        ]
    else:
        wl = width(shape.leaves)
        leaves = [b.switch(f"leaf-{i + 1:0{wl}d}", "leaf", index=i) for i in range(shape.leaves)]
    hosts = shape.hosts_per_leaf
    links = b.links
    rows: list[tuple[list[str], list[str]]] = []
    endpoint = 0
    for node in nodes:
        for h in range(node.hcas):
            links.append(Link(node.name, h + 1, leaves[endpoint // hosts], endpoint % hosts + 1, "node_leaf"))
            endpoint += 1
    for r in range(0, shape.leaves, LEAVES_PER_ROW):
        lo, hi = r * hosts, min((r + LEAVES_PER_ROW) * hosts, endpoint)
        row_nodes = [n.name for n in nodes[lo // ro.hcas_per_node : -(-hi // ro.hcas_per_node)]]
        if rows and row_nodes and rows[-1][0] and rows[-1][0][-1] == row_nodes[0]:
            row_nodes = row_nodes[1:]  # a node straddling two rows stays in the first
        rows.append((row_nodes, leaves[r : r + LEAVES_PER_ROW]))
    central = _wire_tree(b, shape, leaves, ports) if shape.levels > 1 else []
    _tree_meta(b.graph, ro, shape)
    _layout(b, rows, central)
    return b.graph


def build_rail_optimized(ro: ResolvedOptions, catalogue: Catalogue) -> FabricGraph:
    """Scalable units of `su_nodes` node slots with one leaf per rail per SU.

    By default an SU has as many slots as a rail leaf has down ports at 1:1, k/2 for a k-port
    switch (32 on a 64-port QM9700, 72 on a 144-port Q3400), as NVIDIA's SuperPODs do; an
    oversubscribed leaf keeps that SU and spends fewer ports on uplinks.
    """
    ports = ro.ports
    hosts_max, _ = leaf_split(ports, ro.down, ro.up)
    slots = ro.options.su_nodes or min(ports // 2, hosts_max)
    if slots <= 0:
        raise PlanError(f"{ro.switch.name} has too few ports for {ro.down}:{ro.up}", element="switch")
    manager = None
    notes: list[Issue] = []
    if ro.options.manager_slot:
        manager = catalogue.nodes.get("UFM-appliance")
        if manager is None:
            raise PlanError("manager_slot needs the node type 'UFM-appliance' in the catalogue")
    compute_per_su = slots - (1 if manager else 0)
    if compute_per_su <= 0:
        raise PlanError(f"an SU of {slots} slot(s) leaves no room for compute nodes", element="su_nodes")
    sus = -(-ro.nodes // compute_per_su)
    rails = ro.hcas_per_node
    if manager is not None and sus * compute_per_su != ro.nodes:
        notes.append(
            Issue(
                "warning",
                "partial-su",
                "su_nodes",
                f"with a manager slot an SU holds {compute_per_su} nodes: {ro.nodes:,} nodes need "
                f"{sus} SUs ({sus * compute_per_su:,} slots); {(sus - 1) * compute_per_su:,} or "
                f"{sus * compute_per_su:,} nodes fill them exactly",
            )
        )
    ws = width(sus)
    shape = fixed_leaves_shape(
        sus * rails, slots, ports, ro.down, ro.up, ro.levels, ro.switch.name, f"su{1:0{ws}d}-leaf-r1"
    )
    b = Builder(ro, catalogue, "rail-optimized")
    links = b.links
    rows: list[tuple[list[str], list[str]]] = []
    leaves: list[str] = []
    remaining = ro.nodes
    per_pod = shape.leaves_per_pod or 1
    for su in range(sus):
        tag = f"su{su + 1:0{ws}d}"
        su_leaves = [
            b.switch(
                f"{tag}-leaf-r{r + 1}",
                "leaf",
                su=su,
                index=r,
                pod=(su * rails + r) // per_pod if shape.levels == 3 else -1,
            )
            for r in range(rails)
        ]
        leaves.extend(su_leaves)
        su_nodes: list[str] = []
        count = min(compute_per_su, remaining)
        remaining -= count
        for j in range(count):
            node = b.node(f"{tag}-n{j + 1:02d}", ro.node_type, su=su, gpus=ro.gpus_per_node, hcas=rails)
            su_nodes.append(node.name)
            for r in range(rails):
                links.append(Link(node.name, r + 1, su_leaves[r], j + 1, "node_leaf"))
        if manager is not None:
            appliance = b.node(f"{tag}-ufm", manager, su=su, hcas=min(manager.hcas, rails))
            su_nodes.append(appliance.name)
            for h in range(appliance.hcas):
                links.append(Link(appliance.name, h + 1, su_leaves[h], slots, "node_leaf"))
        rows.append((su_nodes, su_leaves))
    central = _wire_tree(b, shape, leaves, ports)
    _tree_meta(b.graph, ro, shape, su_nodes=slots, scalable_units=sus, rails=rails, manager_slot=bool(manager))
    b.graph.meta["notes"] = [i.as_dict() for i in notes]
    _layout(b, rows, central)
    return b.graph
