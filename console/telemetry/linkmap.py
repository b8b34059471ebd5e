"""The fabric as telemetry sees it: design links measured at a switch port, and the LIDs to ask.

Every link is identified by its upper switch end (``spine-03/17``, ``su01-leaf-r2/5``): a
design link's ``b`` end is always a switch (nodes are always ``a``). Design names meet the wire
through planned GUIDs: switch GUID → ``S-<guid>`` node id → LID from discovery.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from console.fabric.diags.topology import Topology
from console.telemetry.core import LinkEnd
from designer.graph import FabricGraph

DEFAULT_GBPS = 400.0


def link_id(switch: str, port: int) -> str:
    """The id of the link plugged into ``switch[port]``."""
    return f"{switch}/{port}"


@dataclass
class LinkMap:
    """Links, their measuring ports, switch LIDs and the node each HCA port belongs to."""

    ends: dict[str, LinkEnd] = field(default_factory=dict)
    switch_lids: dict[str, int] = field(default_factory=dict)
    #: design node name → LIDs of its HCA ports, in node port order (rail order)
    node_lids: dict[str, list[int]] = field(default_factory=dict)
    #: LID → design device name (switches and nodes)
    device_of_lid: dict[int, str] = field(default_factory=dict)
    #: design device → {port: (peer device, peer port)}; nodes use their node port numbers
    ports: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)
    #: node name → {node port: (leaf, leaf port)}
    node_uplinks: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)
    tiers: dict[str, str] = field(default_factory=dict)  # switch → tier

    def links_of_nodes(self, nodes: set[str]) -> set[str]:
        """Host links of ``nodes`` (the leaf port each of their HCAs is cabled to)."""
        return {link_id(leaf, port) for n in nodes for leaf, port in self.node_uplinks.get(n, {}).values()}

    def describe(self, lid: str) -> str:
        """A link named by both ends and its cable (the id alone for a link not in the design)."""
        end = self.ends.get(lid)
        return end.describe() if end is not None else lid

    def measured_ports(self) -> dict[str, list[int]]:
        """switch → sorted ports the collector reads."""
        out: dict[str, list[int]] = {}
        for end in self.ends.values():
            out.setdefault(end.switch, []).append(end.port)
        return {sw: sorted(ports) for sw, ports in out.items()}


def build_link_map(graph: FabricGraph, discovered: Topology | None = None) -> LinkMap:
    """Join the design graph with a discovery (for LIDs); without one, LIDs stay unknown."""
    lm = LinkMap()
    for name, sw in graph.switches.items():
        lm.tiers[name] = sw.tier
    for lk in graph.links:
        if lk.b not in graph.switches:
            continue
        gen_gbps = graph.port_gbps(lk.b, lk.b_port)[1] or DEFAULT_GBPS
        lid = link_id(lk.b, lk.b_port)
        lm.ends[lid] = LinkEnd(
            lid, lk.b, lk.b_port, lk.a, lk.a_port, lk.tier, float(gen_gbps), lk.cable or "", float(lk.length_m or 0)
        )
        lm.ports.setdefault(lk.b, {})[lk.b_port] = (lk.a, lk.a_port)
        lm.ports.setdefault(lk.a, {})[lk.a_port] = (lk.b, lk.b_port)
        if lk.a in graph.nodes:
            lm.node_uplinks.setdefault(lk.a, {})[lk.a_port] = (lk.b, lk.b_port)
    if discovered is None:
        return lm
    by_id = discovered.nodes
    for name, sw in graph.switches.items():
        node = by_id.get(f"S-{sw.guid:016x}")
        if node is not None and node.lid:
            lm.switch_lids[name] = node.lid
            lm.device_of_lid[node.lid] = name
    for name, n in graph.nodes.items():
        lids = []
        for ca in n.ca_guids:
            node = by_id.get(f"H-{ca:016x}")
            lids.append(node.lid if node is not None and node.lid else 0)
            if lids[-1]:
                lm.device_of_lid[lids[-1]] = name
        lm.node_lids[name] = lids
    return lm
