"""Pod level: switches as themselves inside their group's compound, hosts collapsed per leaf.

With a focus (a group id such as ``su-1`` or ``pod-3``) the other groups are collapsed, except
tier groups next to it small enough to stay expanded; without one every group is expanded.
Parallel links are bundled per pair of drawn elements.

Each tier of a group is wrapped into rows of at most SWITCHES_PER_ROW switches (32 spines are four
rows of eight, not a 2,000-px strip), tiers are aligned across groups, and the collapsed groups
stand in a grid to the right, so the level fits a canvas with readable labels.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from designer.canvas.elements import DX, DY, HOST, bundle, bundled_edges, grid, switch_node
from designer.canvas.groups import CanvasIndex, group_label, is_tier_group, tier_rank

#: Tier groups (spines of a 2-level fabric, cores) stay expanded next to a focused group up to
#: this many switches; beyond it they are one box.
EXPANDED_TIER_LIMIT = 64
GROUP_GAP = 1.0  # empty columns between groups
SWITCHES_PER_ROW = 8
ROW_DY = 62.0  # between wrapped rows of one tier
HOST_DY = 58.0  # from a leaf down to its hosts box
TIER_GAP = 130.0  # between the last row of a tier and the next tier
COLLAPSED_COLS = 2
COLLAPSED_DX = 165.0  # collapsed boxes are drawn 150 x 56 ("mini")
COLLAPSED_DY = 72.0


def pod_level(idx: CanvasIndex, focus: str | None, parent: str | None = None) -> dict:
    """Switches placed per group and tier, collapsed groups and host boxes, bundled edges;
    ``parent`` (the pod of a focused scalable unit: its spines) expanded above the focus."""
    graph = idx.graph
    switches = graph.switches
    if focus is None:
        expanded = set(idx.groups)
    else:
        expanded = {focus} | ({parent} if parent else set())
        for g in _neighbour_groups(idx, focus):
            if is_tier_group(g) and len(idx.members[g]) <= EXPANDED_TIER_LIMIT:
                expanded.add(g)
    torus = graph.topology == "torus"
    nodes: list[dict] = []
    pos: dict[str, tuple[float, float]] = {}
    rank_of = {g: min(tier_rank(switches[m].tier) for m in idx.members[g]) for g in idx.groups}
    shown = [g for g in idx.groups if g in expanded]
    bottom = max(tier_rank(switches[m].tier) for g in shown for m in idx.members[g])
    # Groups holding the lowest tier left to right, each tier rows centred in the group's width;
    # tier groups above them (global spines/cores) spread across the whole width.
    spread = [g for g in shown if (is_tier_group(g) or g == parent) and rank_of[g] < bottom]
    local = [g for g in shown if g not in spread]
    widths = {g: _group_width(idx, g, torus) for g in local}
    total_cols = sum(widths.values()) + GROUP_GAP * max(len(local) - 1, 0)
    spread_cols = max(SWITCHES_PER_ROW, int(total_cols))
    rows: dict[int, int] = defaultdict(int)  # wrapped rows per tier rank
    for g in local:
        for rank, names in _by_rank(idx, g).items():
            rows[rank] = max(rows[rank], -(-len(names) // SWITCHES_PER_ROW))
    for g in spread:
        rows[rank_of[g]] = max(rows[rank_of[g]], -(-len(idx.members[g]) // spread_cols))
    for g in idx.groups:  # a collapsed tier box takes a row of its own above the switches
        if g not in expanded and is_tier_group(g) and rank_of[g] < bottom:
            rows[rank_of[g]] = max(rows[rank_of[g]], 1)
    top_y = _tier_ys(rows, bottom)
    col = 0.0
    for g in local:
        _place_group(idx, g, col, torus, pos, top_y)
        col += widths[g] + GROUP_GAP
    total_width = max(total_cols - 1, 0.0) * DX
    for g in spread:
        members = idx.members[g]
        cells = grid(len(members), spread_cols)
        per_row = max(c for c, _ in cells) + 1
        step = total_width / max(per_row - 1, 1) if per_row > 1 else DX
        start = (total_width - step * (per_row - 1)) / 2
        for m, (c, r) in zip(members, cells, strict=True):
            pos[m] = (start + c * step, top_y[rank_of[g]] + r * ROW_DY)
    for name, (x, y) in pos.items():
        nodes.append(switch_node(idx, name, x, y, idx.group[name]))
    nodes += _group_boxes(idx, expanded, pos, total_width, top_y, rank_of, bottom)
    nodes += _host_boxes(idx, pos, torus)
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
        bundle(bundles, src, dst, lk, idx.status(lk))
    return {"nodes": nodes, "edges": bundled_edges(bundles, with_links=True)}


def _tier_ys(rows: dict[int, int], bottom: int) -> dict[int, float]:
    """y of the first row of every tier rank 0..bottom, top first (ranks without rows take a gap)."""
    ys: dict[int, float] = {}
    y = 0.0
    for rank in range(0, bottom + 1):
        ys[rank] = y
        y += max(rows.get(rank, 0) - 1, 0) * ROW_DY + (TIER_GAP if rows.get(rank) else TIER_GAP * 0.6)
    return ys


def _group_boxes(
    idx: CanvasIndex,
    expanded: set[str],
    pos: dict,
    total_width: float,
    top_y: dict[int, float],
    rank_of: dict[str, int],
    bottom: int,
) -> list[dict]:
    """Compound boxes for expanded groups; the others collapsed, in a grid right of the switches."""
    graph = idx.graph
    out = []
    collapsed = [g for g in idx.groups if g not in expanded]
    local_collapsed = [g for g in collapsed if not is_tier_group(g)]
    cells = dict(zip(local_collapsed, grid(len(local_collapsed), COLLAPSED_COLS), strict=True))
    left = total_width + DX * 1.4
    for g in idx.groups:
        label = group_label(g, graph.topology)
        members = idx.members[g]
        node: dict[str, Any] = {
            "id": g,
            "label": label,
            "kind": "group",
            "tier": "group",
            "ports_used": sum(idx.used.get(m, 0) for m in members),
            "ports_total": sum(idx.total(m) for m in members),
            "data": {"name": label, "switches": len(members)},
        }
        changed = idx.group_status(g)
        if g in expanded:
            xs = [pos[m][0] for m in members]
            ys = [pos[m][1] for m in members]
            node.update(x=round(sum(xs) / len(xs), 1), y=round(sum(ys) / len(ys), 1))
            node["data"]["compound"] = True
        else:
            if is_tier_group(g):
                x, y = total_width / 2, top_y[min(rank_of[g], bottom)]
            else:
                c, r = cells[g]
                x, y = left + c * COLLAPSED_DX, r * COLLAPSED_DY
                node["data"]["mini"] = True
            node.update(label=f"{label}\n{len(members)} switches", x=round(x, 1), y=round(y, 1))
            if changed:
                node["diff"] = "changed"
        if changed:
            node["data"]["diff_counts"] = changed
        out.append(node)
    return out


def _host_boxes(idx: CanvasIndex, pos: dict, torus: bool) -> list[dict]:
    """Hosts collapsed behind their leaf, one box per leaf just below it."""
    switches = idx.graph.switches
    out = []
    for name in pos:
        links = idx.hosts.get(name)
        if not links:
            continue
        x, y = pos[name]
        hosts = {lk.a if lk.a not in switches else lk.b for lk in links}
        out.append(
            {
                "id": f"hosts:{name}",
                "label": f"{len(hosts)} nodes",
                "kind": "node-group",
                "tier": HOST,
                "x": round(x + (DX * 0.3 if torus else 0), 1),
                "y": round(y + (DY * 0.45 if torus else HOST_DY), 1),
                "ports_used": len(links),
                "ports_total": len(links),
                "data": {"leaf": name, "hosts": len(hosts), "first": min(hosts), "last": max(hosts)},
            }
        )
    return out


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


def _by_rank(idx: CanvasIndex, g: str) -> dict[int, list[str]]:
    switches = idx.graph.switches
    rows: dict[int, list[str]] = defaultdict(list)
    for m in idx.members[g]:
        rows[tier_rank(switches[m].tier)].append(m)
    return rows


def _is_torus_group(idx: CanvasIndex, g: str, torus: bool) -> bool:
    return torus and all(idx.graph.switches[m].coords for m in idx.members[g])


def _group_width(idx: CanvasIndex, g: str, torus: bool) -> float:
    """Columns a group takes."""
    if _is_torus_group(idx, g, torus):
        return max(idx.graph.switches[m].coords[0] + 1 for m in idx.members[g]) * 1.5
    return float(min(SWITCHES_PER_ROW, max(len(r) for r in _by_rank(idx, g).values())))


def _place_group(idx: CanvasIndex, g: str, col: float, torus: bool, pos: dict, top_y: dict[int, float]) -> None:
    """Place a group's switches from column `col`, each tier in rows of SWITCHES_PER_ROW."""
    switches = idx.graph.switches
    if _is_torus_group(idx, g, torus):
        for m in idx.members[g]:
            xyz = switches[m].coords
            pos[m] = ((col + xyz[0] * 1.5) * DX, xyz[1] * DY * 0.6 + 2 * DY)
        return
    width = _group_width(idx, g, torus)
    for rank, names in _by_rank(idx, g).items():
        cells = grid(len(names), SWITCHES_PER_ROW)
        per_row = max(c for c, _ in cells) + 1
        offset = (width - per_row) / 2
        pitch = ROW_DY + (HOST_DY if any(idx.hosts.get(m) for m in names) else 0.0)
        for m, (c, r) in zip(names, cells, strict=True):
            pos[m] = ((col + offset + c) * DX, top_y[rank] + r * pitch)
