"""A powered-off node on a lab fabric: its HCA cables are pulled in ibsim when the BMC reports it
off, and put back when the BMC reports it on (console.fabric.lab.faults, read back over SMPs).
Not a lab fabric, or no lab running: nothing to do."""

from __future__ import annotations

import logging

from console.fabric.lab import faults
from console.fabric.lab.fabrics import lab_for
from console.fabric.lab.spec import LabError
from console.fabric.models import Fabric
from console.tenancy.context import Actor
from designer.services import revision_graph
from scheduling.models import Node

log = logging.getLogger(__name__)


def node_ports(node: Node) -> list[int]:
    """The node's HCA ports as the design numbers them (1 = HCA-1, …)."""
    graph = revision_graph(node.fabric.revision)
    designed = graph.nodes.get(node.name)
    return list(range(1, designed.hcas + 1)) if designed is not None else []


def set_links(node: Node, *, up: bool, actor: Actor | None = None) -> list[str]:
    """Plug (``up``) or pull every HCA cable of ``node`` in its fabric's running lab; ports
    already that way are left alone. Returns what was changed ("node[port]"); a lab error is
    logged (the node's power state follows the BMC, not the lab)."""
    fabric = Fabric.objects.select_related("revision").get(pk=node.fabric_id)
    if fabric.driver != Fabric.Driver.LAB:
        return []
    try:
        lab = lab_for(fabric)
    except LabError as exc:
        log.info("no lab for %s: %s", fabric.name, exc)
        return []
    changed: list[str] = []
    for port in node_ports(node):
        try:
            sim_node, sim_port = faults.resolve_port(fabric, node.name, port)
            info = faults.read_port(lab, lab.node_id(sim_node), sim_port)
            if (info.phys_state == "LinkUp" and not info.is_down) == up:
                continue
            (faults.replug if up else faults.unplug)(fabric, node.name, port, actor=actor)
            changed.append(f"{node.name}[{port}]")
        except LabError as exc:
            log.warning("lab: %s %s[%d] failed: %s", "replug" if up else "unplug", node.name, port, exc)
    return changed
