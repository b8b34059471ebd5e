"""Which links are down on purpose: those of nodes powered off (or powering off, or still
booting: their ports come up with the OS) by an operator or the power policy. A node whose power action failed (``failed``) or that went dark while
``on`` is a failure, and its links raise the link-down alarm."""

from __future__ import annotations

from console.telemetry.linkmap import LinkMap
from scheduling.models import Node

INTENDED_OFF = (Node.Power.OFF, Node.Power.POWERING_OFF, Node.Power.POWERING_ON)


def powered_off_links(fabric_id: int, link_map: LinkMap) -> set[str]:
    """Link ids of the fabric's nodes that are off, powering off or booting as intended."""
    names = Node.objects.filter(fabric_id=fabric_id, power_state__in=INTENDED_OFF).values_list("name", flat=True)
    return link_map.links_of_nodes(set(names))
