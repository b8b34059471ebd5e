"""The discovered fabric as ibnetdiscover reports it: nodes, ports, chassis and import findings.

Plain typed records shared by the readers (plain and ``-g`` output, ``-p`` ports reports, ibsim net
files), the inference and the graph builder; discovery and compare read the same records.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from designer.catalogue import LANE_GBPS

#: The node description every SHARP-capable switch gives the CA on its extra port.
AGGREGATION_NODE = "Aggregation Node"
#: NVIDIA switch descriptions: ``MF0;<host>:M<model>[/<slot>]/U<asic>`` (slot L01/S01 on directors).
MF0 = re.compile(r"^MF0;([^:]+):M?([A-Za-z0-9_-]+?)((?:/(?!U\d+$)[A-Za-z]+\d+)*)(?:/U(\d+))?$")
_SLOT = re.compile(r"^/([A-Za-z]+)(\d+)")
#: A director ASIC's design name (:attr:`SwitchDesc.name`): ``<chassis>/<slot>/U<asic>``.
_DIRECTOR_NAME = re.compile(r"^(.+)/([A-Za-z]+\d+)/U(\d+)$")


@dataclass
class Finding:
    """One import finding: a kind (stable code), what it is about, the sentence, the input line."""

    code: str
    element: str
    message: str
    line: int = 0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "severity": "warning",
            "code": self.code,
            "element": self.element,
            "message": self.message,
        }
        if self.line:
            out["line"] = self.line
        return out


@dataclass
class IbPort:
    """One port line: the local port, its peer and the link's discovered state."""

    port: int
    peer_id: str
    peer_port: int
    port_guid: int | None = None
    peer_port_guid: int | None = None
    peer_desc: str = ""
    lid: int | None = None  # local LID (CA ports)
    lmc: int | None = None
    peer_lid: int | None = None
    width: int | None = None  # e.g. 4
    speed: str | None = None  # e.g. "NDR"
    ext_port: int | None = None
    line: int = 0

    @property
    def rate_gbps(self) -> float | None:
        """The link's data rate (width × lane rate), None when not reported."""
        if self.width is None or self.speed not in LANE_GBPS:
            return None
        return self.width * LANE_GBPS[self.speed]

    @property
    def rate(self) -> str:
        """The rate label as ibnetdiscover prints it (``4xNDR``), "" when not reported."""
        return f"{self.width}x{self.speed}" if self.width and self.speed else ""


@dataclass
class IbNode:
    """One node record: header, the assignment lines before it, and its port lines."""

    kind: str  # Switch | Ca | Rt
    nports: int
    node_id: str  # e.g. "S-0002c90200000001"
    desc: str = ""
    guid: int | None = None
    port_guid: int | None = None  # switchguid=…(portguid)
    sysimgguid: int | None = None
    vendid: int | None = None
    devid: int | None = None
    lid: int | None = None
    lmc: int | None = None
    enhanced_port0: bool | None = None
    ports: list[IbPort] = field(default_factory=list)
    line: int = 0
    slot: str = ""  # "-g" grouping: e.g. "Line 2 Chip 1"

    @property
    def aggregation_node(self) -> bool:
        """A SHARP Aggregation Node: a CA inside a switch, not a host."""
        return self.kind == "Ca" and AGGREGATION_NODE in self.desc


@dataclass(frozen=True)
class SwitchDesc:
    """What an NVIDIA switch description says: host name, model, director slot and ASIC."""

    host: str
    model: str | None
    slot: str = ""  # "L01", "S20" on directors
    asic: int = 1

    @property
    def name(self) -> str:
        """The switch's design name: the host, and slot/ASIC for a director's ASICs."""
        return f"{self.host}/{self.slot}/U{self.asic}" if self.slot else self.host

    @property
    def role(self) -> str:
        """ "line", "spine" (director ASICs by slot letter) or "" for a standalone switch."""
        letter = self.slot[:1].upper()
        return {"L": "line", "S": "spine", "F": "spine"}.get(letter, "") if self.slot else ""


def director_place(name: str) -> tuple[str, str, int] | None:
    """(chassis, slot, ASIC) of a director ASIC's design name (``dir1/L03/U1`` → ``("dir1", "L03", 1)``),
    None for any other name."""
    m = _DIRECTOR_NAME.match(name)
    return (m.group(1), m.group(2), int(m.group(3))) if m else None


def switch_desc(desc: str) -> SwitchDesc:
    """Split a switch node description; non-NVIDIA descriptions are the name as they stand."""
    m = MF0.match(desc)
    if not m:
        return SwitchDesc(desc, None)
    slots = m.group(3) or ""
    slot = _SLOT.match(slots)
    return SwitchDesc(
        m.group(1),
        m.group(2),
        f"{slot.group(1)}{slot.group(2)}" if slot else "",
        int(m.group(4)) if m.group(4) else 1,
    )


@dataclass
class Discovery:
    """Everything one ibnetdiscover run reported, and what the reader had to say about it."""

    nodes: list[IbNode]
    findings: list[Finding] = field(default_factory=list)
    source: str = "ibnetdiscover"  # ibnetdiscover | ports-report
    _by_id: dict[str, IbNode] | None = field(default=None, init=False, repr=False, compare=False)

    def by_id(self) -> dict[str, IbNode]:
        """Node id → node."""
        if self._by_id is None or len(self._by_id) != len(self.nodes):
            self._by_id = {n.node_id: n for n in self.nodes}
        return self._by_id

    @property
    def switches(self) -> list[IbNode]:
        return [n for n in self.nodes if n.kind == "Switch"]

    @property
    def cas(self) -> list[IbNode]:
        """The hosts' channel adapters (Aggregation Nodes excluded)."""
        return [n for n in self.nodes if n.kind == "Ca" and not n.aggregation_node]

    @property
    def aggregation_nodes(self) -> list[IbNode]:
        return [n for n in self.nodes if n.aggregation_node]

    def chassis(self) -> dict[int, list[IbNode]]:
        """Director chassis: system image GUID → its switch ASICs (two or more share it)."""
        groups: dict[int, list[IbNode]] = {}
        for node in self.switches:
            if node.sysimgguid is not None:
                groups.setdefault(node.sysimgguid, []).append(node)
        return {guid: asics for guid, asics in groups.items() if len(asics) > 1}

    def links(self) -> list[tuple[IbNode, IbPort, IbNode, int]]:
        """Each cable once: (node, port, peer node, peer port)."""
        nodes = self.by_id()
        seen: set[tuple[tuple[str, int], tuple[str, int]]] = set()
        out = []
        for node in self.nodes:
            for p in node.ports:
                here, there = (node.node_id, p.port), (p.peer_id, p.peer_port)
                key = (here, there) if here <= there else (there, here)
                if key in seen:
                    continue
                seen.add(key)
                peer = nodes.get(p.peer_id)
                if peer is not None:
                    out.append((node, p, peer, p.peer_port))
        return out
