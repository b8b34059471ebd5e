"""Nodes that lost their path (issue 35), from the collector's link alarms: a node with one of its
host links down is marked (:mod:`scheduling.services.node_paths`: no new placement, drained in
Slurm, the reason in words), and cleared when every one of its links is up again."""

from __future__ import annotations

from collections.abc import Iterable

from console.telemetry.linkmap import LinkMap, link_id
from console.telemetry.models import FabricEvent
from console.tenancy.context import Actor
from scheduling.models import Node
from scheduling.services import node_paths

ACTOR = Actor.system("telemetry:lost-paths")


def node_links(lm: LinkMap) -> dict[str, list[str]]:
    """Node → the ids of its host links (one per cabled HCA port)."""
    return {
        node: sorted(link_id(leaf, port) for leaf, port in ports.values()) for node, ports in lm.node_uplinks.items()
    }


def update(fabric_id: int, lm: LinkMap, events: Iterable[FabricEvent]) -> list[str]:
    """Mark or clear the nodes whose host links the ``events`` (opened or resolved) are about;
    the names of the nodes whose mark changed."""
    subjects = {e.subject for e in events if e.kind == FabricEvent.Kind.LINK_DOWN}
    if not subjects:  # (every sweep comes here: most have no link event at all)
        return []
    links = node_links(lm)
    owner = {lid: node for node, ids in links.items() for lid in ids}
    touched = sorted({owner[s] for s in subjects if s in owner})
    if not touched:
        return []
    down = set(
        FabricEvent.objects.unresolved()
        .filter(fabric_id=fabric_id, kind=FabricEvent.Kind.LINK_DOWN)
        .values_list("subject", flat=True)
    )
    changed = []
    for node in Node.objects.filter(fabric_id=fabric_id, name__in=touched).order_by("name"):
        lost = [lid for lid in links[node.name] if lid in down]
        if lost:
            what = f"link {lost[0]} down" if len(lost) == 1 else f"links {', '.join(lost)} down"
            done = node_paths.mark(ACTOR, node.pk, f"{what} ({len(lost)} of {len(links[node.name])} of its ports)")
        else:
            done = node_paths.clear(ACTOR, node.pk)
        if done:
            changed.append(node.name)
    return changed
