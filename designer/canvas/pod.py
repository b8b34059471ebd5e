"""Pod level: switches as themselves inside their group's compound, hosts collapsed per leaf.

With a focus (a group id such as ``su-1`` or ``pod-3``) the other groups are collapsed, except
tier groups next to it small enough to stay expanded; without one every group is expanded.
Parallel links are bundled per pair of drawn elements.
"""

from __future__ import annotations

from collections import defaultdict

from designer.canvas.elements import DX, DY, HOST, bundle, bundled_edges, switch_node
from designer.canvas.groups import CanvasIndex, group_label, is_tier_group, tier_rank

#: Tier groups (spines of a 2-level fabric, cores) stay expanded next to a focused group up to
#: this many switches; beyond it they are one box.
EXPANDED_TIER_LIMIT = 64
GROUP_GAP = 1.0  # empty columns between groups


def pod_level(idx: CanvasIndex, focus: str | None) -> dict:
    """Switches placed per group and tier, collapsed groups and host boxes, bundled edges."""
    graph = idx.graph
    switches = graph.switches
    if focus is None:
        expanded = set(idx.groups)
    else:
        expanded = {focus}
        neighbours = _neighbour_groups(idx, focus)
        for g in neighbours:
            if is_tier_group(g) and len(idx.members[g]) <= EXPANDED_TIER_LIMIT:
                expanded.add(g)
    torus = graph.topology == "torus"
    nodes: list[dict] = []
    pos: dict[str, tuple[float, float]] = {}
    rank_of = {g: min(tier_rank(switches[m].tier) for m in idx.members[g]) for g in idx.groups}
    shown = [g for g in idx.groups if g in expanded]
    bottom = max(tier_rank(switches[m].tier) for g in shown for m in idx.members[g])
    # Groups holding the lowest tier left to right, each tier a row centred in the group's width;
    # tier groups above them (global spines/cores) spread across the whole width.
    spread = [g for g in shown if is_tier_group(g) and rank_of[g] < bottom]
    col = 0.0
    for g in shown:
        if g not in spread:
            col = _place_group(idx, g, col, torus, pos) + GROUP_GAP
    total_width = max(col - GROUP_GAP - 1, 0.0) * DX
    for g in spread:
        members = idx.members[g]
        step = max(DX, total_width / max(len(members) - 1, 1))
        start = (total_width - step * (len(members) - 1)) / 2
        for i, m in enumerate(members):
            pos[m] = (start + i * step, rank_of[g] * DY)
    for name, (x, y) in pos.items():
        nodes.append(switch_node(idx, name, x, y, idx.group[name]))
    # Compound boxes for expanded groups, collapsed boxes for the rest.
    collapsed_col = col + 1
    for g in idx.groups:
        label = group_label(g, graph.topology)
        members = idx.members[g]
        used = sum(idx.used.get(m, 0) for m in members)
        total = sum(idx.total(m) for m in members)
        if g in expanded:
            xs = [pos[m][0] for m in members]
            ys = [pos[m][1] for m in members]
            nodes.append(
                {
                    "id": g,
                    "label": label,
                    "kind": "group",
                    "tier": "group",
                    "x": round(sum(xs) / len(xs), 1),
                    "y": round(sum(ys) / len(ys), 1),
                    "ports_used": used,
                    "ports_total": total,
                    "data": {"name": label, "switches": len(xs), "compound": True},
                }
            )
            continue
        if is_tier_group(g):
            x, y = total_width / 2, min(rank_of[g], bottom) * DY
        else:
            x, y = collapsed_col * DX, bottom * DY
            collapsed_col += 2.5
        nodes.append(
            {
                "id": g,
                "label": f"{label}\n{len(members)} switches",
                "kind": "group",
                "tier": "group",
                "x": round(x, 1),
                "y": round(y, 1),
                "ports_used": used,
                "ports_total": total,
                "data": {"name": label, "switches": len(members)},
            }
        )
    # Hosts collapsed behind their leaf.
    for name in pos:
        links = idx.hosts.get(name)
        if not links:
            continue
        x, y = pos[name]
        hosts = {lk.a if lk.a not in switches else lk.b for lk in links}
        hy = y + DY * (0.45 if torus else 0.8)
        nodes.append(
            {
                "id": f"hosts:{name}",
                "label": f"{len(hosts)} nodes",
                "kind": "node-group",
                "tier": HOST,
                "x": round(x + (DX * 0.3 if torus else 0), 1),
                "y": round(hy, 1),
                "ports_used": len(links),
                "ports_total": len(links),
                "data": {"leaf": name, "hosts": len(hosts), "first": min(hosts), "last": max(hosts)},
            }
        )
    bundles: dict = {}
    for lk in graph.links:
        a_in = lk.a in pos
        b_in = lk.b in pos
        if not (a_in or b_in):
            continue
        src = lk.a if a_in else (idx.group.get(lk.a) or f"hosts:{lk.b}")
        dst = lk.b if b_in else (idx.group.get(lk.b) or f"hosts:{lk.a}")
        if src == dst:
            continue
        bundle(bundles, src, dst, lk)
    return {"nodes": nodes, "edges": bundled_edges(bundles, with_links=True)}


def _neighbour_groups(idx: CanvasIndex, focus: str) -> set[str]:
    group = idx.group
    out: set[str] = set()
    for lk in idx.graph.links:
        ga, gb = group.get(lk.a), group.get(lk.b)
        if ga == focus and gb and gb != focus:
            out.add(gb)
        elif gb == focus and ga and ga != focus:
            out.add(ga)
    return out


def _place_group(idx: CanvasIndex, g: str, col: float, torus: bool, pos: dict) -> float:
    """Place a group's switches from column `col`; returns the column after the group."""
    switches = idx.graph.switches
    members = idx.members[g]
    if torus and all(switches[m].coords for m in members):
        width = 0
        for m in members:
            c = switches[m].coords
            pos[m] = ((col + c[0] * 1.5) * DX, c[1] * DY * 0.6 + 2 * DY)
            width = max(width, c[0] + 1)
        return col + width * 1.5
    rows: dict[int, list[str]] = defaultdict(list)
    for m in members:
        rows[tier_rank(switches[m].tier)].append(m)
    width = max(len(r) for r in rows.values())
    for rank, names in rows.items():
        offset = (width - len(names)) / 2
        for i, m in enumerate(names):
            pos[m] = ((col + offset + i) * DX, rank * DY)
    return col + width
