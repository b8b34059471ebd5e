"""Fabric level: one box per pod, scalable unit or torus plane, links bundled between boxes with their count.

The global spine or core tier is a box of its own; when every group hangs off it (an SU or pod
fabric) it stands in the middle and the groups around it on the border of a grid shaped like the
canvas (16 pods: 6 x 4), so the picture fills the canvas with readable labels instead of a strip.
Otherwise the groups fill rows under the tier boxes.

``scalable_units`` is the same picture inside one pod of a 3-level rail-optimised design: its
scalable units round its spines (as a 2-level design's round its spine tier), the cores above.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

from designer.canvas.elements import DY, bundle, bundled_edges, grid
from designer.canvas.groups import CanvasIndex, count_label, group_label, is_tier_group, su_of, tier_rank


def scalable_units(idx: CanvasIndex, pod: str) -> dict:
    """The SU level of a pod: its scalable units, its spines and the tiers above, as boxes."""
    shown = set(idx.sus[pod]) | {pod} | {g for g in idx.groups if is_tier_group(g)}
    return fabric_level(idx.units_of(pod), only=shown, hubs={pod})


def fabric_level(idx: CanvasIndex, only: set[str] | None = None, hubs: set[str] | frozenset = frozenset()) -> dict:
    """Group boxes and the bundled links between them (``only`` those groups when given; ``hubs``
    drawn as tiers are: the boxes the others stand round)."""
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
        elif only is None or (ga in only and gb in only):
            bundle(bundles, ga, gb, lk, idx.status(lk))
    drawn = [g for g in idx.groups if only is None or g in only]
    local = [g for g in drawn if not is_tier_group(g) and g not in hubs]
    tiers = [g for g in drawn if is_tier_group(g) or g in hubs]
    rank_of = {g: min(tier_rank(switches[m].tier) for m in idx.members[g]) for g in tiers}
    tiers.sort(key=rank_of.__getitem__)  # the top tier first
    nodes = []
    if tiers and len(local) > RING_FROM:
        # A star: the tier every group connects to in the middle, the groups around it.
        cells, cols, rows = ring(len(local))
        for g, (c, r) in zip(local, cells, strict=True):
            nodes.append(_group_node(idx, g, c * BOX_DX, r * BOX_DY, hosts_of, internal))
        mid_x, mid_y = (cols - 1) * BOX_DX / 2, (rows - 1) * BOX_DY / 2
        for i, g in enumerate(tiers):
            y = mid_y + (i - (len(tiers) - 1) / 2) * BOX_DY * 0.8
            nodes.append(_group_node(idx, g, mid_x, y, hosts_of, internal))
        return {"nodes": nodes, "edges": bundled_edges(bundles, with_links=False)}
    bottom = max((tier_rank(switches[m].tier) for g in local for m in idx.members[g]), default=2)
    cells = grid(len(local), max(3, min(len(local), RING_FROM - 1), math.ceil(math.sqrt(len(local) * 1.5))))
    width = max((c for c, _ in cells), default=0) * BOX_DX
    for g, (c, r) in zip(local, cells, strict=True):
        nodes.append(_group_node(idx, g, c * BOX_DX, bottom * DY + r * BOX_DY, hosts_of, internal))
    for g in tiers:
        rank = rank_of[g]
        nodes.append(_group_node(idx, g, width / 2, min(rank, bottom - 1) * DY, hosts_of, internal))
    return {"nodes": nodes, "edges": bundled_edges(bundles, with_links=False)}


RING_FROM = 5  # more groups than this stand around their spine or core tier
BOX_DX = 230.0  # a group box is 200 canvas px wide
BOX_DY = 150.0


def ring(n: int) -> tuple[list[tuple[int, int]], int, int]:
    """(column, row) of n cells clockwise round the border of a grid about 1.5 times wider than tall
    (8 groups: 3 x 3, 16: 5 x 5), and the grid's columns and rows."""
    rows = 3
    while True:
        cols = max(3, math.ceil((n + 4 - 2 * rows) / 2))
        if cols <= 1.3 * rows:
            break
        rows += 1
    border = [(c, 0) for c in range(cols)]
    border += [(cols - 1, r) for r in range(1, rows)]
    border += [(c, rows - 1) for c in range(cols - 2, -1, -1)]
    border += [(0, r) for r in range(rows - 2, 0, -1)]
    return border[:n], cols, rows


def _group_node(idx: CanvasIndex, g: str, x: float, y: float, hosts_of: dict, internal: Counter) -> dict:
    members = idx.members[g]
    tiers = Counter(idx.graph.switches[m].tier for m in members)
    hosts = len(hosts_of.get(g, ()))
    parts = [count_label(n, t) for t, n in tiers.items()]
    if hosts:
        parts.append(f"{hosts} nodes")
    label = group_label(g, idx.graph.topology)
    node: dict[str, Any] = {
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
    if idx.sus.get(g) and any(su_of(idx.graph.switches[m]) for m in members):
        node["data"]["sus"] = len(idx.sus[g])  # a pod holding scalable units: they are its next level
    changed = idx.group_status(g)
    if changed:
        node["diff"] = "changed"
        node["data"]["diff_counts"] = changed
    return node
