"""The fabric's cabling as the diags and the lab use it, read with the project's one parser.

The same text format serves three purposes: ``ibnetdiscover`` output (what is cabled), the
designer's export that ibsim loads (what should be cabled), and the lab's name lookup
(node description ↔ node id, because ibsim's console only accepts node ids, see
:mod:`console.fabric.lab`). All three are read by :mod:`designer.imports` (the importer's
parser); :func:`topology_of` gives the id-keyed view the diags work with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from designer.imports.ibnetdiscover import Discovery, parse_ibnetdiscover


@dataclass
class TopoNode:
    """A switch or channel adapter."""

    node_id: str
    kind: str
    nports: int
    guid: int | None = None
    description: str = ""
    lid: int | None = None

    @property
    def name(self) -> str:
        """The operator-facing name: the node description, else the node id."""
        return self.description or self.node_id

    @property
    def is_switch(self) -> bool:
        """True for switches."""
        return self.kind == "Switch"


@dataclass(frozen=True)
class TopoLink:
    """A cable between two ports, ends ordered so the same cable always compares equal."""

    a_id: str
    a_port: int
    b_id: str
    b_port: int
    width: str = ""
    speed: str = ""

    @staticmethod
    def make(a: tuple[str, int], b: tuple[str, int], width: str = "", speed: str = "") -> TopoLink:
        """Build a link with canonical end order."""
        (a_id, a_port), (b_id, b_port) = sorted([a, b])
        return TopoLink(a_id, a_port, b_id, b_port, width, speed)


@dataclass
class Topology:
    """Nodes by id and the set of links."""

    nodes: dict[str, TopoNode] = field(default_factory=dict)
    links: set[TopoLink] = field(default_factory=set)
    # Port GUID of CA ports (node id, port) → GUID; switches use the node GUID on port 0.
    port_guids: dict[tuple[str, int], int] = field(default_factory=dict)

    def by_name(self, name: str) -> TopoNode:
        """Look a node up by node id or by description; raises KeyError if unknown/ambiguous."""
        if name in self.nodes:
            return self.nodes[name]
        matches = [n for n in self.nodes.values() if n.description == name]
        if len(matches) != 1:
            raise KeyError(f"no unique node named {name!r}")
        return matches[0]

    def link_at(self, node_id: str, port: int) -> TopoLink | None:
        """The link plugged into ``node_id[port]``, if any."""
        for link in self.links:
            if (link.a_id, link.a_port) == (node_id, port) or (link.b_id, link.b_port) == (
                node_id,
                port,
            ):
                return link
        return None

    def ca_port_guids(self) -> dict[int, str]:
        """Port GUID → node id for every CA port with a known GUID."""
        return {g: nid for (nid, _), g in self.port_guids.items() if not self.nodes[nid].is_switch}

    def switches(self) -> list[TopoNode]:
        """All switches."""
        return [n for n in self.nodes.values() if n.is_switch]

    def cas(self) -> list[TopoNode]:
        """All channel adapters."""
        return [n for n in self.nodes.values() if not n.is_switch]


def parse_topology(text: str) -> Topology:
    """Parse ibnetdiscover output or an ibsim net file (ParseError names a bad line)."""
    return topology_of(parse_ibnetdiscover(text))


def topology_of(disc: Discovery) -> Topology:
    """The id-keyed view of a parsed discovery.

    A CA port's GUID is the one ibnetdiscover prints in parentheses, else (ibsim net files) its
    node GUID + port number, which is how ibsim assigns them. A CA's LID is its ports'.
    """
    topo = Topology()
    for ib in disc.nodes:
        node = TopoNode(ib.node_id, ib.kind, ib.nports, ib.guid, ib.desc)
        topo.nodes[ib.node_id] = node
        if node.is_switch:
            node.lid = ib.lid
            if ib.guid is not None:
                topo.port_guids[(ib.node_id, 0)] = ib.guid
            continue
        for p in ib.ports:
            if p.port_guid is not None:
                topo.port_guids[(ib.node_id, p.port)] = p.port_guid
            elif ib.guid is not None:
                topo.port_guids[(ib.node_id, p.port)] = ib.guid + p.port
            if p.lid is not None:
                node.lid = p.lid
    # A cable seen from both ends may carry the rate on one end only: keep the annotated one.
    for ib, port, peer, peer_port in disc.links():
        back = next((q for q in peer.ports if q.port == peer_port), None)
        rated = port if port.rate else back if back is not None and back.rate else None
        width, speed = (f"{rated.width}x", rated.speed or "") if rated is not None else ("", "")
        topo.links.add(TopoLink.make((ib.node_id, port.port), (peer.node_id, peer_port), width, speed))
    return topo
