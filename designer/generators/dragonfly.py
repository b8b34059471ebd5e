"""Dragonfly+: groups of leaves and spines (bipartite inside a group), spines linked globally."""

from __future__ import annotations

from designer.catalogue import Catalogue
from designer.errors import PlanError
from designer.generators.common import Builder, width
from designer.graph import FabricGraph, Link
from designer.layout import Cell, FloorPlan, alternate_row, assign_cables
from designer.options import ResolvedOptions
from designer.sizing import leaf_split, uplinks_for


def build_dragonfly_plus(ro: ResolvedOptions, catalogue: Catalogue) -> FabricGraph:
    """Leaves link once to every spine of their group; spines spread global links evenly."""
    ports = ro.ports
    hosts = ro.options.hosts_per_switch or leaf_split(ports, ro.down, ro.up)[0]
    up = uplinks_for(hosts, ro.down, ro.up)
    if hosts + up > ports:
        raise PlanError(
            f"a dragonfly+ leaf needs {hosts + up} ports ({hosts} hosts + {up} up at "
            f"{ro.down}:{ro.up}), {ro.switch.name} has {ports}: use at most "
            f"{leaf_split(ports, ro.down, ro.up)[0]} hosts per switch",
            element="hosts_per_switch",
        )
    leaves = -(-ro.endpoints // hosts)
    hosts = -(-ro.endpoints // leaves)
    up = uplinks_for(hosts, ro.down, ro.up)
    spines_per_group = up  # one link from every leaf to every spine of its group
    per_group_max = ports // 2
    groups = ro.options.groups or -(-leaves // per_group_max)
    per_group = -(-leaves // groups)
    if per_group > per_group_max:
        raise PlanError(
            f"{groups} groups of {per_group} leaves exceed a spine's {per_group_max} down ports: "
            f"use at least {-(-leaves // per_group_max)} groups",
            element="groups",
        )
    global_ports = min(per_group, ports - per_group)
    per_pair = (spines_per_group * global_ports) // (groups - 1) if groups > 1 else 0
    if groups > 1 and per_pair == 0:
        raise PlanError(
            f"{groups} groups need a global link between every pair, but a group has only "
            f"{spines_per_group * global_ports} global ports: use at most "
            f"{spines_per_group * global_ports + 1} groups",
            element="groups",
        )
    b = Builder(ro, catalogue, "dragonfly-plus")
    links = b.links
    wg, wl = width(groups), width(per_group)
    wn = max(3, len(str(ro.nodes)))
    leaf_names: list[str] = []
    spine_names: list[list[str]] = []
    for g in range(groups):
        count = min(per_group, leaves - g * per_group)
        for li in range(max(0, count)):
            leaf_names.append(b.switch(f"g{g + 1:0{wg}d}-leaf-{li + 1:0{wl}d}", "leaf", pod=g, index=li))
        spine_names.append(
            [b.switch(f"g{g + 1:0{wg}d}-spine-{s + 1:02d}", "spine", pod=g, index=s) for s in range(spines_per_group)]
        )
    cells: dict[str, list[str]] = {leaf: [] for leaf in leaf_names}
    endpoint = 0
    for i in range(ro.nodes):
        node = b.node(f"node-{i + 1:0{wn}d}", ro.node_type, gpus=ro.gpus_per_node, hcas=ro.hcas_per_node)
        cells[leaf_names[endpoint // hosts]].append(node.name)
        for h in range(node.hcas):
            links.append(Link(node.name, h + 1, leaf_names[endpoint // hosts], endpoint % hosts + 1, "node_leaf"))
            endpoint += 1
    switches = b.graph.switches
    for leaf in leaf_names:
        sw = switches[leaf]
        for s, spine in enumerate(spine_names[sw.pod]):
            links.append(Link(leaf, ports - up + 1 + s, spine, sw.index + 1, "leaf_spine"))
    # global slots: round-robin over spines so each pair's links spread across spines
    slots = [[(spine, per_group + 1 + p) for p in range(global_ports) for spine in names] for names in spine_names]
    cursor = [0] * groups
    for _ in range(per_pair):
        for g1 in range(groups):
            for g2 in range(g1 + 1, groups):
                s1, p1 = slots[g1][cursor[g1]]
                s2, p2 = slots[g2][cursor[g2]]
                cursor[g1] += 1
                cursor[g2] += 1
                links.append(Link(s1, p1, s2, p2, "global"))
    b.graph.meta.update(
        groups=groups,
        leaves_per_group=per_group,
        spines_per_group=spines_per_group,
        global_links_per_pair=per_pair,
        hosts_per_switch=hosts,
        routing="updn",
        oversubscription=f"{ro.down}:{ro.up}",
        options=ro.options.as_dict(),
    )
    plan = FloorPlan(b.graph)
    for g in range(groups):
        group_leaves = [n for n in leaf_names if switches[n].pod == g]
        plan.row(alternate_row(g), [Cell(cells[n], [n]) for n in group_leaves], spine_names[g])
    assign_cables(b.graph)
    return b.graph
