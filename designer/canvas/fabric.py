"""Fabric level: one box per pod, scalable unit or torus plane, links bundled between boxes with their count.

The global spine or core tier is a box of its own above the groups.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from designer.canvas.elements import DX, DY, bundle, bundled_edges
from designer.canvas.groups import CanvasIndex, count_label, group_label, is_tier_group, tier_rank


def fabric_level(idx: CanvasIndex) -> dict:
    """Group boxes and the bundled links between them."""
    graph = idx.graph
    switches = graph.switches
    group = idx.group
    hosts_of: dict[str, set[str]] = defaultdict(set)
    bundles: dict = {}
    internal: Counter[str] = Counter()
    for lk in graph.links:
        ga = group.get(lk.a)
        gb = group.get(lk.b)
        if ga is None or gb is None:
            if ga is not None:
                hosts_of[ga].add(lk.b)
            elif gb is not None:
                hosts_of[gb].add(lk.a)
            continue
        if ga == gb:
            internal[ga] += 1
        else:
            bundle(bundles, ga, gb, lk)
    local = [g for g in idx.groups if not is_tier_group(g)]
    tiers = [g for g in idx.groups if is_tier_group(g)]
    bottom = max((tier_rank(switches[m].tier) for g in local for m in idx.members[g]), default=2)
    width = max(len(local), 1) * DX * 2.5
    nodes = []
    for i, g in enumerate(local):
        nodes.append(_group_node(idx, g, (i + 0.5) * DX * 2.5, bottom * DY, hosts_of, internal))
    for g in tiers:
        rank = tier_rank(g.partition("-")[2])
        nodes.append(_group_node(idx, g, width / 2, min(rank, bottom - 1) * DY, hosts_of, internal))
    return {"nodes": nodes, "edges": bundled_edges(bundles, with_links=False)}


def _group_node(idx: CanvasIndex, g: str, x: float, y: float, hosts_of: dict, internal: Counter) -> dict:
    members = idx.members[g]
    tiers = Counter(idx.graph.switches[m].tier for m in members)
    hosts = len(hosts_of.get(g, ()))
    parts = [count_label(n, t) for t, n in tiers.items()]
    if hosts:
        parts.append(f"{hosts} nodes")
    label = group_label(g, idx.graph.topology)
    return {
        "id": g,
        "label": f"{label}\n{' · '.join(parts)}",
        "kind": "group",
        "tier": "group" if not is_tier_group(g) else g.partition("-")[2],
        "x": round(x, 1),
        "y": round(y, 1),
        "ports_used": sum(idx.used.get(m, 0) for m in members),
        "ports_total": sum(idx.total(m) for m in members),
        "data": {
            "name": label,
            "switches": len(members),
            "tiers": dict(tiers),
            "hosts": hosts,
            "internal_links": internal.get(g, 0),
        },
    }
