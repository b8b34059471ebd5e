"""Cytoscape elements every level draws the same way: a switch node and bundled edges, on one grid."""

from __future__ import annotations

from collections import Counter

from designer.canvas.groups import CanvasIndex
from designer.graph import Link

#: Links listed on a bundled edge so one can be inspected or disconnected.
LINKS_PER_EDGE = 64

DX = 64.0  # column pitch of switches
DY = 170.0  # row pitch of tiers
HOST = "node"


def switch_node(idx: CanvasIndex, name: str, x: float, y: float, parent: str | None) -> dict:
    """A switch as a canvas node at (x, y), inside compound `parent` if given."""
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


def bundle(bundles: dict, src: str, dst: str, lk: Link) -> None:
    """Add a link to the bundle between two drawn elements (either direction is one bundle)."""
    key = (src, dst) if src <= dst else (dst, src)
    entry = bundles.get(key)
    if entry is None:
        entry = bundles[key] = {"count": 0, "tiers": Counter(), "cables": Counter(), "links": []}
    entry["count"] += 1
    entry["tiers"][lk.tier] += 1
    entry["cables"][lk.cable] += 1
    if len(entry["links"]) < LINKS_PER_EDGE:
        entry["links"].append([lk.a, lk.a_port, lk.b, lk.b_port, lk.cable, lk.length_m])


def bundled_edges(bundles: dict, with_links: bool) -> list[dict]:
    """One edge per bundle with its link count, main tier and cable (or "mixed")."""
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
