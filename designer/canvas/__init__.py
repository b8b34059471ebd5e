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
``AUTO_DETAIL_SWITCHES`` switches and that level's labels are readable when it is fitted to the
canvas (at least ``MIN_LABEL_PX`` on screen), and the fabric overview otherwise. Every switch at
once (``pod`` without a focus) is refused above ``AUTO_DETAIL_SWITCHES``: drill into a group
instead. Below it a level too big to fit with readable labels is zoomed to readable labels by the
browser (frontend/src/designer/canvas.ts), the rest a pan away.

``diff_from`` (another graph, the older revision) draws what changed from it: see
designer.canvas.diff.
"""

from __future__ import annotations

from designer.canvas.diff import union_with_marks
from designer.canvas.elements import MIN_LABEL_PX, readable
from designer.canvas.fabric import fabric_level
from designer.canvas.faceplate import faceplate
from designer.canvas.groups import CanvasIndex, group_label, group_of
from designer.canvas.pod import pod_level
from designer.errors import DesignerError
from designer.graph import FabricGraph

__all__ = ["AUTO_DETAIL_SWITCHES", "LEVELS", "MIN_LABEL_PX", "CanvasError", "canvas_view", "group_of"]

LEVELS = ("auto", "fabric", "pod", "switch")
AUTO_DETAIL_SWITCHES = 200


class CanvasError(DesignerError, ValueError):
    """Unknown level or focus; the message says what exists."""


def _crumbs(idx: CanvasIndex, level: str, focus: str | None) -> list[dict]:
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


def canvas_view(
    graph: FabricGraph, level: str = "auto", focus: str | None = None, diff_from: FabricGraph | None = None
) -> dict:
    """Positions and bundled edges of one level of detail of a graph (see the module doc)."""
    if level not in LEVELS:
        raise CanvasError(f"unknown level {level!r}: choose {', '.join(LEVELS)}")
    focus = focus or None
    legend = None
    if diff_from is not None:
        graph, switch_status, link_status, legend = union_with_marks(diff_from, graph)
    idx = CanvasIndex(graph)
    if diff_from is not None:
        idx.switch_status, idx.link_status = switch_status, link_status
    body: dict | None = None
    if level == "auto":
        if focus and focus in graph.switches:
            level = "switch"
        elif focus:
            level = "pod"
        elif len(graph.switches) <= AUTO_DETAIL_SWITCHES:
            body = pod_level(idx, None)
            level = "pod" if readable(body["nodes"]) else "fabric"
            body = body if level == "pod" else None
        else:
            level = "fabric"
    if body is not None:
        pass
    elif level == "switch":
        if focus not in graph.switches:
            shown = ", ".join(list(graph.switches)[:5])
            raise CanvasError(f"switch level needs a switch name as focus, got {focus!r} (e.g. {shown})")
        body = faceplate(idx, focus)
    elif level == "pod":
        if focus is not None and focus not in idx.members:
            raise CanvasError(f"unknown group {focus!r}: choose {', '.join(idx.groups)}")
        if focus is None and len(graph.switches) > AUTO_DETAIL_SWITCHES:
            raise CanvasError(
                f"{len(graph.switches)} switches are too many to show at once: choose a group, {_some(idx)}"
            )
        body = pod_level(idx, focus)
    else:
        focus = None
        body = fabric_level(idx)
    out = {
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
    if legend is not None:
        out["diff"] = legend
    return out


def _some(idx: CanvasIndex) -> str:
    return ", ".join(idx.groups[:4]) + (" …" if len(idx.groups) > 4 else "")
