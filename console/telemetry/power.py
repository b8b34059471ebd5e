"""Node power on the live view.

- Which links are down on purpose: those of nodes powered off (or powering off, or still
  booting: their ports come up with the OS) by an operator or the power policy. A node whose
  power action failed (``failed``) or that went dark while ``on`` is a failure, and its links
  raise the link-down alarm.
- The power states a live client starts from (:func:`power_states`, in the REST snapshot) and the
  ``node.power`` message each change sends to the fabric's group and to the groups of the
  tenants holding the node (:func:`announce`, a receiver of the power app's
  ``power_state_changed``, sent after commit).
"""

from __future__ import annotations

import logging
from typing import Any

from console.broadcast import fabric_group, publish, tenant_group
from console.power.signals import power_state_changed
from console.telemetry.linkmap import LinkMap
from scheduling.models import Node, Reservation, ReservationAllocation

INTENDED_OFF = (Node.Power.OFF, Node.Power.POWERING_OFF, Node.Power.POWERING_ON)
DISPATCH_UID = "console.telemetry.power.announce"

log = logging.getLogger(__name__)


def powered_off_links(fabric_id: int, link_map: LinkMap) -> set[str]:
    """Link ids of the fabric's nodes that are off, powering off or booting as intended."""
    names = Node.objects.filter(fabric_id=fabric_id, power_state__in=INTENDED_OFF).values_list("name", flat=True)
    return link_map.links_of_nodes(set(names))


def _body(node_id: int, state: str, since: Any) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "state": state,
        "since": since.isoformat() if since else None,
        "intended": state != Node.Power.FAILED,
    }


def power_states(fabric_id: int, hosts: set[str] | None) -> dict[str, dict[str, Any]]:
    """The fabric's nodes that are not plainly ``on``: name → id, state, since (ISO), intended.
    ``hosts``: the names the principal may see (None: all)."""
    rows = Node.objects.filter(fabric_id=fabric_id).exclude(power_state=Node.Power.ON)
    if hosts is not None:
        rows = rows.filter(name__in=hosts)
    return {
        name: _body(pk, state, since)
        for pk, name, state, since in rows.values_list("pk", "name", "power_state", "power_changed_at")
    }


def announce(*, node_id: int, state: str, **_: Any) -> None:
    """Send a node's new power state to its fabric's live group and to the groups of the
    tenants whose reservations hold it (their live view names their own hosts only)."""
    node = Node.objects.filter(pk=node_id).values_list("fabric_id", "name", "power_state", "power_changed_at").first()
    if node is None:
        return
    fabric_id, name, current, since = node
    message = {"type": "node.power", "fabric": fabric_id, "node": name, **_body(node_id, current, since)}
    publish(fabric_group(fabric_id), message)
    # the node's holders, whichever fabric their reservation is homed on (a spanning one's nodes
    # are on several)
    tenants = ReservationAllocation.objects.filter(
        node_id=node_id, reservation__status__in=Reservation.HOLDING
    ).values_list("reservation__tenant_id", flat=True)
    for tenant_id in sorted(set(tenants)):
        publish(tenant_group(tenant_id), message)


def connect() -> None:
    """Connect :func:`announce` (idempotent: by dispatch uid)."""
    power_state_changed.connect(announce, dispatch_uid=DISPATCH_UID)
