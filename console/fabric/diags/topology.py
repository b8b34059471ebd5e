"""The project's parser of the ibnetdiscover topology format (also ibsim's net file format).

The same text format serves three purposes: ``ibnetdiscover`` output (what is cabled), the
designer's export that ibsim loads (what should be cabled), and the lab's name lookup
(node description ↔ node id, because ibsim's console only accepts node ids, see
:mod:`console.fabric.lab`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NODE_RE = re.compile(
    r'^(?P<kind>Switch|Ca|Hca|Rt)\s+(?P<nports>\d+)\s+"(?P<id>[^"]+)"'
    r'(?:\s*#\s*"(?P<desc>[^"]*)"(?P<rest>.*))?$'
)
_PORT_RE = re.compile(
    r'^\[(?P<port>\d+)\](?:\((?P<pguid>[0-9a-fA-F]+)\))?\s*"(?P<rid>[^"]+)"\[(?P<rport>\d+)\]'
    r"(?:\((?P<rguid>[0-9a-fA-F]+)\))?(?P<rest>.*)$"
)
_GUID_LINE_RE = re.compile(r"^(?P<kind>switchguid|caguid|hcaguids|rtguid)\s*=\s*(?P<guid>0x[0-9a-fA-F]+)")
_LINKSPEC_RE = re.compile(r"\b(?P<width>\d+x)(?P<speed>[A-Z0-9]+)\b")


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
    """Parse ibnetdiscover output or an ibsim net file.

    GUIDs come from ``switchguid=``/``caguid=`` lines (ibsim assigns CA port N the GUID
    node GUID + N) or from the ``(guid)`` annotations ibnetdiscover prints.
    """
    topo = Topology()
    pending_guid: int | None = None
    current: TopoNode | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            current = None
            continue
        if m := _GUID_LINE_RE.match(line):
            pending_guid = int(m["guid"], 16)
            continue
        if line.startswith("#"):
            continue
        if m := _NODE_RE.match(line):
            kind = "Ca" if m["kind"] == "Hca" else m["kind"]
            current = TopoNode(m["id"], kind, int(m["nports"]), pending_guid, m["desc"] or "")
            if m["rest"] and (lid := re.search(r"\blid (\d+)", m["rest"])) and kind == "Switch":
                current.lid = int(lid[1])
            if current.guid is None and (g := re.match(r"^[SH]-([0-9a-fA-F]{16})$", m["id"])):
                current.guid = int(g[1], 16)
            topo.nodes[current.node_id] = current
            if current.guid is not None:
                if current.is_switch:
                    topo.port_guids[(current.node_id, 0)] = current.guid
            pending_guid = None
            continue
        if current is not None and (m := _PORT_RE.match(line)):
            port = int(m["port"])
            spec = _LINKSPEC_RE.search(m["rest"] or "")
            topo.links.add(
                TopoLink.make(
                    (current.node_id, port),
                    (m["rid"], int(m["rport"])),
                    spec["width"] if spec else "",
                    spec["speed"] if spec else "",
                )
            )
            if not current.is_switch:
                if m["pguid"]:
                    topo.port_guids[(current.node_id, port)] = int(m["pguid"], 16)
                elif current.guid is not None:
                    topo.port_guids[(current.node_id, port)] = current.guid + port
                if lid := re.search(r"#\s*lid (\d+)", m["rest"] or ""):
                    current.lid = int(lid[1])
    # Links seen from both ends may carry different annotations; keep one per port pair.
    unique: dict[tuple[str, int, str, int], TopoLink] = {}
    for link in sorted(topo.links, key=lambda x: (x.width == "", x.a_id, x.a_port)):
        unique.setdefault((link.a_id, link.a_port, link.b_id, link.b_port), link)
    topo.links = set(unique.values())
    return topo
