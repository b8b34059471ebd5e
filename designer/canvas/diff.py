"""A revision diff drawn on the canvas: the newer graph plus what the older one had and lost.

The canvas of the union (the new graph with the removed switches, nodes and cables of the old one
put back) is built as usual; every switch, group box and bundled edge touched by the diff carries
``diff`` = "added", "removed" or "changed" (a group or a bundle mixing them is "changed"), and
the view a ``diff`` summary with the counts for the legend.
"""

from __future__ import annotations

from designer.compare import SWITCH_FIELDS, diff_graphs
from designer.graph import FabricGraph


def union_with_marks(old: FabricGraph, new: FabricGraph) -> tuple[FabricGraph, dict[str, str], dict, dict]:
    """The graph to draw, status per switch and per link key, and the legend's counts."""
    d = diff_graphs(old, new)
    union = FabricGraph(
        new.catalogue,
        new.topology,
        dict(new.switches),
        dict(new.nodes),
        list(new.links),
        dict(new.racks),
        dict(new.meta),
    )
    switch_status: dict[str, str] = {}
    for name in d.added_switches:
        switch_status[name] = "added"
    for name in d.removed_switches:
        union.switches[name] = old.switches[name]
        switch_status[name] = "removed"
    for change in d.changed_switches:
        if change["field"] in SWITCH_FIELDS:
            switch_status.setdefault(change["name"], "changed")
    for name in d.removed_nodes:
        union.nodes[name] = old.nodes[name]
    old_links = {lk.key(): lk for lk in old.links}
    new_keys = {lk.key() for lk in new.links}
    link_status: dict = {}
    for key, lk in old_links.items():
        if key not in new_keys:
            union.links.append(lk)
            link_status[key] = "removed"
    for lk in new.links:
        key = lk.key()
        if key not in old_links:
            link_status[key] = "added"
        else:
            before = old_links[key]
            if (before.cable, before.length_m, before.tier) != (lk.cable, lk.length_m, lk.tier):
                link_status[key] = "changed"
    legend = {
        "switches": {s: sum(1 for v in switch_status.values() if v == s) for s in ("added", "removed", "changed")},
        "cables": {s: sum(1 for v in link_status.values() if v == s) for s in ("added", "removed", "changed")},
    }
    return union, switch_status, link_status, legend
