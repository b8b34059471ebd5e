"""Server-side canvas: level of detail and a deterministic tiered layout for Cytoscape.js.

Physics and layered layouts (ELK, dagre) take seconds at fabric scale and never agree twice, so
positions are computed here in one pass over the graph and the browser draws them as a `preset`
layout. Three levels:

- ``fabric``: one box per pod / scalable unit / torus plane, the global spine or core tier as a
  box of its own, links bundled between boxes with their count;
- ``pod`` (focus = a group id such as ``su-1`` or ``pod-3``, or none for every group): switches as
  themselves inside their group's compound, hosts collapsed into one "N nodes" box per leaf,
  parallel links bundled per device pair, the other groups collapsed;
- ``switch`` (focus = a switch name): its ports as a faceplate with the peer on every port.

``auto`` shows every switch (hosts collapsed) when the design has at most
``AUTO_DETAIL_SWITCHES`` switches and the fabric overview otherwise.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from designer.errors import DesignerError
from designer.graph import FabricGraph, Link, Switch

LEVELS = ("auto", "fabric", "pod", "switch")
AUTO_DETAIL_SWITCHES = 200
#: Tier groups (spines of a 2-level fabric, cores) stay expanded next to a focused group up to
#: this many switches; beyond it they are one box.
EXPANDED_TIER_LIMIT = 64
#: Links listed on a bundled edge so one can be inspected or disconnected.
LINKS_PER_EDGE = 64

DX = 64.0  # column pitch of switches
DY = 170.0  # row pitch of tiers
GROUP_GAP = 1.0  # empty columns between groups
PORT_DX = 34.0
PORT_DY = 34.0
TIER_RANK = {"core": 0, "spine": 1, "leaf": 2, "torus": 2}
HOST = "node"


class CanvasError(DesignerError, ValueError):
    """Unknown level or focus; the message says what exists."""


def _rank(tier: str) -> int:
    return TIER_RANK.get(tier, 2)


def group_of(sw: Switch) -> str:
    """The box a switch is drawn in at fabric level."""
    if sw.pod >= 0:
        return f"pod-{sw.pod + 1}"
    if sw.su >= 0:
        return f"su-{sw.su + 1}"
    if len(sw.coords) == 3:
        return f"plane-{sw.coords[2] + 1}"
    return f"tier-{sw.tier}"


def group_label(group: str, topology: str) -> str:
    kind, _, rest = group.partition("-")
    if kind == "pod":
        return f"{'Group' if topology == 'dragonfly-plus' else 'Pod'} {rest}"
    if kind == "su":
        return f"SU {rest}"
    if kind == "plane":
        return f"Plane z={int(rest) - 1}"
    return f"{rest.capitalize()} tier"


def _count(n: int, tier: str) -> str:
    """ "8 leaves", "1 spine", "16 torus switches"."""
    if tier == "leaf":
        return f"{n} {'leaf' if n == 1 else 'leaves'}"
    if tier in TIER_RANK and tier != "torus":
        return f"{n} {tier}{'' if n == 1 else 's'}"
    return f"{n} {tier} switch{'' if n == 1 else 'es'}"


def _is_tier_group(group: str) -> bool:
    return group.startswith("tier-")


def _group_sort_key(group: str) -> tuple[int, int, str]:
    kind, _, rest = group.partition("-")
    if kind == "tier":
        return (1, _rank(rest), rest)
    return (0, int(rest) if rest.isdigit() else 0, kind)


class _Index:
    """One pass over the links: usage per device, hosts per switch, groups."""

    def __init__(self, graph: FabricGraph) -> None:
        self.graph = graph
        self.used: Counter[str] = Counter()
        self.hosts: dict[str, list[Link]] = defaultdict(list)
        self.group: dict[str, str] = {}
        self.members: dict[str, list[str]] = defaultdict(list)
        for name, sw in graph.switches.items():
            g = group_of(sw)
            self.group[name] = g
            self.members[g].append(name)
        switches = graph.switches
        for lk in graph.links:
            self.used[lk.a] += 1
            self.used[lk.b] += 1
            if lk.a not in switches and lk.b in switches:
                self.hosts[lk.b].append(lk)
            elif lk.b not in switches and lk.a in switches:
                self.hosts[lk.a].append(lk)
        self.groups = sorted(self.members, key=_group_sort_key)
        self.ports_total: dict[str, int] = {}

    def total(self, device: str) -> int:
        n = self.ports_total.get(device)
        if n is None:
            n = self.ports_total[device] = self.graph.port_count(device)
        return n


def _switch_node(idx: _Index, name: str, x: float, y: float, parent: str | None) -> dict:
    sw = idx.graph.switches[name]
    node = {
        "id": name,
        "label": name,
        "kind": "switch",
        "tier": sw.tier,
        "x": round(x, 1),
        "y": round(y, 1),
        "ports_used": idx.used.get(name, 0),
        "ports_total": idx.total(name),
        "data": {
            "model": sw.model,
            "guid": f"0x{sw.guid:016x}",
            "rack": sw.rack,
            "u": sw.u,
            "group": idx.group[name],
            "split": sw.split or "",
        },
    }
    if parent:
        node["parent"] = parent
    return node


def _bundle(bundles: dict, src: str, dst: str, lk: Link) -> None:
    key = (src, dst) if src <= dst else (dst, src)
    entry = bundles.get(key)
    if entry is None:
        entry = bundles[key] = {"count": 0, "tiers": Counter(), "cables": Counter(), "links": []}
    entry["count"] += 1
    entry["tiers"][lk.tier] += 1
    entry["cables"][lk.cable] += 1
    if len(entry["links"]) < LINKS_PER_EDGE:
        entry["links"].append([lk.a, lk.a_port, lk.b, lk.b_port, lk.cable, lk.length_m])


def _edges(bundles: dict, with_links: bool) -> list[dict]:
    out = []
    for (src, dst), e in bundles.items():
        cable = next(iter(e["cables"])) if len(e["cables"]) == 1 else "mixed"
        edge = {
            "id": f"{src}--{dst}",
            "source": src,
            "target": dst,
            "count": e["count"],
            "tier": e["tiers"].most_common(1)[0][0],
            "cable": cable,
        }
        if with_links:
            edge["links"] = e["links"]
        out.append(edge)
    return out


def _crumbs(idx: _Index, level: str, focus: str | None) -> list[dict]:
    crumbs: list[dict] = [{"level": "fabric", "focus": None, "label": "Fabric"}]
    topo = idx.graph.topology
    if level == "pod":
        label = group_label(focus, topo) if focus else "All switches"
        crumbs.append({"level": "pod", "focus": focus, "label": label})
    elif level == "switch" and focus:
        group = idx.group[focus]
        crumbs.append({"level": "pod", "focus": group, "label": group_label(group, topo)})
        crumbs.append({"level": "switch", "focus": focus, "label": focus})
    return crumbs


# ---- fabric ---------------------------------------------------------------------------------
def _fabric(idx: _Index) -> dict:
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
            _bundle(bundles, ga, gb, lk)
    local = [g for g in idx.groups if not _is_tier_group(g)]
    tiers = [g for g in idx.groups if _is_tier_group(g)]
    bottom = max((_rank(switches[m].tier) for g in local for m in idx.members[g]), default=2)
    width = max(len(local), 1) * DX * 2.5
    nodes = []
    for i, g in enumerate(local):
        nodes.append(_group_node(idx, g, (i + 0.5) * DX * 2.5, bottom * DY, hosts_of, internal))
    for g in tiers:
        rank = _rank(g.partition("-")[2])
        nodes.append(_group_node(idx, g, width / 2, min(rank, bottom - 1) * DY, hosts_of, internal))
    return {"nodes": nodes, "edges": _edges(bundles, with_links=False)}


def _group_node(idx: _Index, g: str, x: float, y: float, hosts_of: dict, internal: Counter) -> dict:
    members = idx.members[g]
    tiers = Counter(idx.graph.switches[m].tier for m in members)
    hosts = len(hosts_of.get(g, ()))
    parts = [_count(n, t) for t, n in tiers.items()]
    if hosts:
        parts.append(f"{hosts} nodes")
    label = group_label(g, idx.graph.topology)
    return {
        "id": g,
        "label": f"{label}\n{' · '.join(parts)}",
        "kind": "group",
        "tier": "group" if not _is_tier_group(g) else g.partition("-")[2],
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


# ---- pod ------------------------------------------------------------------------------------
def _pod(idx: _Index, focus: str | None) -> dict:
    graph = idx.graph
    switches = graph.switches
    if focus is None:
        expanded = set(idx.groups)
    else:
        expanded = {focus}
        neighbours = _neighbour_groups(idx, focus)
        for g in neighbours:
            if _is_tier_group(g) and len(idx.members[g]) <= EXPANDED_TIER_LIMIT:
                expanded.add(g)
    torus = graph.topology == "torus"
    nodes: list[dict] = []
    pos: dict[str, tuple[float, float]] = {}
    rank_of = {g: min(_rank(switches[m].tier) for m in idx.members[g]) for g in idx.groups}
    shown = [g for g in idx.groups if g in expanded]
    bottom = max(_rank(switches[m].tier) for g in shown for m in idx.members[g])
    # Groups holding the lowest tier left to right, each tier a row centred in the group's width;
    # tier groups above them (global spines/cores) spread across the whole width.
    spread = [g for g in shown if _is_tier_group(g) and rank_of[g] < bottom]
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
        nodes.append(_switch_node(idx, name, x, y, idx.group[name]))
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
        if _is_tier_group(g):
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
        _bundle(bundles, src, dst, lk)
    return {"nodes": nodes, "edges": _edges(bundles, with_links=True)}


def _neighbour_groups(idx: _Index, focus: str) -> set[str]:
    group = idx.group
    out: set[str] = set()
    for lk in idx.graph.links:
        ga, gb = group.get(lk.a), group.get(lk.b)
        if ga == focus and gb and gb != focus:
            out.add(gb)
        elif gb == focus and ga and ga != focus:
            out.add(ga)
    return out


def _place_group(idx: _Index, g: str, col: float, torus: bool, pos: dict) -> float:
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
        rows[_rank(switches[m].tier)].append(m)
    width = max(len(r) for r in rows.values())
    for rank, names in rows.items():
        offset = (width - len(names)) / 2
        for i, m in enumerate(names):
            pos[m] = ((col + offset + i) * DX, rank * DY)
    return col + width


# ---- switch ---------------------------------------------------------------------------------
def _switch(idx: _Index, name: str) -> dict:
    graph = idx.graph
    sw = graph.switches[name]
    model = graph.catalogue.switches.get(sw.model)
    total = idx.total(name)
    split = sw.split if model and sw.split in model.split_modes else None
    per_cage = max(1, total // max(1, model.cages)) if model else 2
    rank = _rank(sw.tier)
    ports: list[dict] = []
    nodes: list[dict] = []
    edges: list[dict] = []
    peers: dict[str, list[int]] = {}
    by_port = {}
    for lk in graph.links:
        if lk.a == name:
            by_port[lk.a_port] = (lk, lk.b, lk.b_port)
        elif lk.b == name:
            by_port[lk.b_port] = (lk, lk.a, lk.a_port)
    cols = -(-total // per_cage)
    width = cols * PORT_DX
    for p in range(1, total + 1):
        cage = model.cage_of(p, split) if model else (p - 1) // per_cage
        row = (p - 1) % per_cage
        x, y = cage * PORT_DX, row * PORT_DY
        hit = by_port.get(p)
        row_data = {
            "port": p,
            "cage": cage + 1,
            "peer": "",
            "peer_port": None,
            "cable": "",
            "length_m": None,
            "tier": "",
            "free": hit is None,
        }
        if hit:
            lk, peer, peer_port = hit
            row_data.update(peer=peer, peer_port=peer_port, cable=lk.cable, length_m=lk.length_m, tier=lk.tier)
            peers.setdefault(peer, []).append(p)
            edges.append(
                {
                    "id": f"port:{name}:{p}--{peer}",
                    "source": f"port:{name}:{p}",
                    "target": peer,
                    "count": 1,
                    "tier": lk.tier,
                    "cable": lk.cable,
                    "links": [[lk.a, lk.a_port, lk.b, lk.b_port, lk.cable, lk.length_m]],
                }
            )
        ports.append(row_data)
        nodes.append(
            {
                "id": f"port:{name}:{p}",
                "label": str(p),
                "kind": "port",
                "tier": sw.tier,
                "x": round(x, 1),
                "y": round(y, 1),
                "parent": name,
                "ports_used": 0 if hit is None else 1,
                "ports_total": 1,
                "data": {**row_data, "switch": name},
            }
        )
    node = _switch_node(idx, name, width / 2, (per_cage - 1) * PORT_DY / 2, None)
    nodes.insert(0, node)
    above = [p for p in peers if p in graph.switches and _rank(graph.switches[p].tier) < rank]
    below = [p for p in peers if p not in above]
    for names, y in ((above, -DY), (below, (per_cage - 1) * PORT_DY + DY)):
        step = max(DX, width / max(len(names), 1)) if names else DX
        start = (width - step * (len(names) - 1)) / 2
        for i, peer in enumerate(names):
            x = start + i * step
            if peer in graph.switches:
                nodes.append(_switch_node(idx, peer, x, y, None))
            else:
                n = graph.nodes[peer]
                nodes.append(
                    {
                        "id": peer,
                        "label": peer,
                        "kind": "node-group",
                        "tier": HOST,
                        "x": round(x, 1),
                        "y": round(y, 1),
                        "ports_used": idx.used.get(peer, 0),
                        "ports_total": n.hcas,
                        "data": {"hosts": 1, "node_type": n.node_type, "role": n.role, "rack": n.rack},
                    }
                )
    return {"nodes": nodes, "edges": edges, "ports": ports}


# ---- entry point ----------------------------------------------------------------------------
def canvas_view(graph: FabricGraph, level: str = "auto", focus: str | None = None) -> dict:
    """Positions and bundled edges of one level of detail of a graph (see the module doc)."""
    if level not in LEVELS:
        raise CanvasError(f"unknown level {level!r}: choose {', '.join(LEVELS)}")
    focus = focus or None
    idx = _Index(graph)
    if level == "auto":
        if focus and focus in graph.switches:
            level = "switch"
        elif focus:
            level = "pod"
        else:
            level = "pod" if len(graph.switches) <= AUTO_DETAIL_SWITCHES else "fabric"
    if level == "switch":
        if focus not in graph.switches:
            shown = ", ".join(list(graph.switches)[:5])
            raise CanvasError(f"switch level needs a switch name as focus, got {focus!r} (e.g. {shown})")
        body = _switch(idx, focus)
    elif level == "pod":
        if focus is not None and focus not in idx.members:
            raise CanvasError(f"unknown group {focus!r}: choose {', '.join(idx.groups)}")
        body = _pod(idx, focus)
    else:
        focus = None
        body = _fabric(idx)
    return {
        "level": level,
        "focus": focus,
        "topology": graph.topology,
        **body,
        "breadcrumbs": _crumbs(idx, level, focus),
        "groups": [
            {"id": g, "label": group_label(g, graph.topology), "switches": len(idx.members[g])} for g in idx.groups
        ],
        "counts": {
            "switches": len(graph.switches),
            "nodes": len(graph.nodes),
            "links": len(graph.links),
        },
    }
