"""Server-side canvas: level of detail and a deterministic tiered layout for Cytoscape.js.

Physics and layered layouts (ELK, dagre) take seconds at fabric scale and never agree twice, so
positions are computed here in one pass over the graph and the browser draws them as a `preset`
layout. Three levels:

- ``fabric``: one box per pod / scalable unit / torus plane, the global spine or core tier as a
  box of its own, links bundled between boxes with their count; with a pod as focus (a pod of a
  3-level rail-optimised design) the SU level: that pod's scalable units round its spines, as a
  2-level design's stand round its spine tier;
- ``pod`` (focus = a group id such as ``su-1`` or ``pod-3``, or none for every group): switches as
  themselves inside their group's compound, hosts collapsed into one "N nodes" box per leaf,
  parallel links bundled per device pair, the other groups collapsed (a scalable unit inside a
  pod: its leaves under its pod's spines, the pod's other SUs collapsed);
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
from designer.canvas.fabric import fabric_level, scalable_units
from designer.canvas.faceplate import faceplate
from designer.canvas.groups import CanvasIndex, group_label, group_of, su_of
from designer.canvas.pod import pod_level
from designer.errors import DesignerError
from designer.graph import FabricGraph

__all__ = ["AUTO_DETAIL_SWITCHES", "LEVELS", "MIN_LABEL_PX", "CanvasError", "canvas_view", "group_of"]

LEVELS = ("auto", "fabric", "pod", "switch")
AUTO_DETAIL_SWITCHES = 200


class CanvasError(DesignerError, ValueError):
    """Unknown level or focus; the message says what exists."""


def _crumbs(idx: CanvasIndex, level: str, focus: str | None) -> list[dict]:
    """Fabric › [Pod › SU or Switches, when the pod has scalable units] › group › switch."""
    crumbs: list[dict] = [{"level": "fabric", "focus": None, "label": "Fabric"}]
    topo = idx.graph.topology

    def group_crumbs(group: str) -> None:
        pod = idx.su_pod.get(group, group)
        if idx.sus.get(pod):
            crumbs.append({"level": "fabric", "focus": pod, "label": group_label(pod, topo)})
            label = group_label(group, topo) if group != pod else "Switches"
            crumbs.append({"level": "pod", "focus": group, "label": label})
        else:
            crumbs.append({"level": "pod", "focus": group, "label": group_label(group, topo)})

    if level == "fabric" and focus:
        crumbs.append({"level": "fabric", "focus": focus, "label": group_label(focus, topo)})
    elif level == "pod":
        if focus:
            group_crumbs(focus)
        else:
            crumbs.append({"level": "pod", "focus": None, "label": "All switches"})
    elif level == "switch" and focus:
        group_crumbs(su_of(idx.graph.switches[focus]) or idx.group[focus])
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
        if focus is not None and focus not in idx.members and focus not in idx.su_pod:
            raise CanvasError(f"unknown group {focus!r}: choose {', '.join(idx.groups)}")
        if focus is None and len(graph.switches) > AUTO_DETAIL_SWITCHES:
            raise CanvasError(
                f"{len(graph.switches)} switches are too many to show at once: choose a group, {_some(idx)}"
            )
        body = _unit(idx, focus) if focus in idx.su_pod and focus not in idx.members else pod_level(idx, focus)
    elif focus in idx.sus:
        body = scalable_units(idx, focus)
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


def _unit(idx: CanvasIndex, su: str) -> dict:
    """A scalable unit inside a pod: its pod's leaves drawn in their SUs, the pod's spines above."""
    pod = idx.su_pod[su]
    return pod_level(idx.units_of(pod), su, parent=pod)


def _some(idx: CanvasIndex) -> str:
    return ", ".join(idx.groups[:4]) + (" …" if len(idx.groups) > 4 else "")
