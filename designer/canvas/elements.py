"""Cytoscape elements every level draws the same way: a switch node and bundled edges, on one grid."""

from __future__ import annotations

from collections import Counter

from designer.canvas.groups import CanvasIndex
from designer.graph import Link

#: Links listed on a bundled edge so one can be inspected or disconnected.
LINKS_PER_EDGE = 64

DX = 120.0  # column pitch of switches (a 14-character name at FONT["switch"] fits)
DY = 170.0  # row pitch of tiers
HOST = "node"

#: Label font size (canvas units) per element kind; the browser draws these sizes
#: (frontend/src/designer/canvas.ts) and the level chooser checks them against MIN_LABEL_PX.
FONT = {"switch": 15.0, "group": 20.0, "node-group": 15.0, "port": 15.0, "edge": 18.0}
#: No label is drawn smaller than this on screen (Cytoscape's min-zoomed-font-size).
MIN_LABEL_PX = 10.0
#: The canvas area a level is judged readable in (CSS px: the canvas of a 1,600 x 1,000 window).
VIEW_W, VIEW_H = 1100.0, 780.0
MAX_ZOOM = 4.0


def label_px_at_fit(nodes: list[dict]) -> float:
    """On-screen size of the smallest label once `nodes` are fitted to the nominal canvas."""
    if not nodes:
        return FONT["group"]
    xs = [n["x"] for n in nodes if "x" in n]
    ys = [n["y"] for n in nodes if "y" in n]
    width = max(xs) - min(xs) + 2 * DX  # node widths and labels either side
    height = max(ys) - min(ys) + 120.0
    zoom = min(VIEW_W / width, VIEW_H / height, MAX_ZOOM)
    return zoom * min(FONT.get(n["kind"], FONT["switch"]) for n in nodes)


def readable(nodes: list[dict]) -> bool:
    """Whether every label of a level is at least MIN_LABEL_PX on screen when it is fitted."""
    return label_px_at_fit(nodes) >= MIN_LABEL_PX


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
    status = idx.switch_status.get(name)
    if status:
        node["diff"] = status
    return node


def bundle(bundles: dict, src: str, dst: str, lk: Link, status: str | None = None) -> None:
    """Add a link to the bundle between two drawn elements (either direction is one bundle).

    `status` is the link's part in a revision diff ("added", "removed", "changed"), if any.
    """
    key = (src, dst) if src <= dst else (dst, src)
    entry = bundles.get(key)
    if entry is None:
        entry = bundles[key] = {"count": 0, "tiers": Counter(), "cables": Counter(), "links": [], "diff": Counter()}
    entry["count"] += 1
    if status:
        entry["diff"][status] += 1
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
        if e["diff"]:
            edge["diff"] = bundle_status(e["diff"], e["count"])
            edge["diff_counts"] = dict(e["diff"])
        out.append(edge)
    return out


def bundle_status(diff: Counter, count: int) -> str:
    """A bundle is added (or removed) when all its links are, else changed."""
    for status in ("added", "removed"):
        if diff[status] == count:
            return status
    return "changed"


def grid(n: int, max_cols: int) -> list[tuple[int, int]]:
    """(column, row) of n items in rows of at most max_cols."""
    cols = max(1, min(n, max_cols))
    return [(i % cols, i // cols) for i in range(n)]
