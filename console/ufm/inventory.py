"""``GET resources/systems`` and ``resources/ports``: enough of UFM's inventory for a client to
find a host's port GUIDs (the console's inventory: nodes and their HCA ports).

Operators and auditors see every node of the fabric; a tenant the nodes its live reservations
hold, and nothing else.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from console.fabric.models import Fabric
from console.fabric.opensm.lint import parse_guid
from console.tenancy.models import Principal
from console.ufm.wire import ufm_guid
from scheduling.models import HCA, Node, Reservation, ReservationAllocation


def visible_nodes(principal: Principal, fabric: Fabric) -> QuerySet[Node]:
    nodes = Node.objects.filter(fabric=fabric).order_by("name")
    if principal.sees_all_tenants:
        return nodes
    if principal.tenant_id is None:
        return nodes.none()
    held = ReservationAllocation.objects.filter(
        reservation__tenant_id=principal.tenant_id,
        reservation__fabric=fabric,
        reservation__status__in=Reservation.HOLDING,
    ).values("node_id")
    return nodes.filter(pk__in=held)


def _port(node: Node, hca: HCA) -> dict[str, Any] | None:
    guid = parse_guid(hca.port_guid)
    if guid is None:
        return None
    return {
        "guid": ufm_guid(guid),
        "name": f"{ufm_guid(guid)}_1",
        "dname": f"HCA-{hca.index + 1}/1",
        "number": 1,
        "system_name": node.name,
        "systemID": ufm_guid(guid - 1),  # the HCA's node GUID (port 1 is node GUID + 1)
        "node_description": f"{node.name} HCA-{hca.index + 1}",
        "peer_node_name": hca.leaf,
        "peer_port_dname": str(hca.leaf_port or ""),
        "type": "host",
        "external_number": hca.index + 1,
    }


def ports(principal: Principal, fabric: Fabric, *, system: str | None = None) -> list[dict[str, Any]]:
    """HCA ports of the visible nodes; ``system`` narrows to one host (its name or a node GUID)."""
    out = []
    for node in visible_nodes(principal, fabric).prefetch_related("hcas"):
        for hca in node.hcas.all():
            port = _port(node, hca)
            if port is None:
                continue
            if system and system not in (node.name, port["systemID"]):
                continue
            out.append(port)
    return out


def systems(principal: Principal, fabric: Fabric) -> list[dict[str, Any]]:
    """One ``host`` system per visible node, with its ports' names (UFM's ``<guid>_<n>``)."""
    out = []
    for node in visible_nodes(principal, fabric).prefetch_related("hcas"):
        node_ports = [p for p in (_port(node, h) for h in node.hcas.all()) if p is not None]
        out.append(
            {
                "system_name": node.name,
                "system_guid": node_ports[0]["systemID"] if node_ports else "",
                "type": "host",
                "model": node.node_type,
                "description": node.node_type,
                "ports": [p["name"] for p in node_ports],
                "guids": [p["guid"] for p in node_ports],
            }
        )
    return out
