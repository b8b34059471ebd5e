"""Parse ibnetdiscover output (real fabrics, ibsim, or our own export) into records and graphs.

`parse_ibnetdiscover` returns the raw discovery (nodes, ports, GUIDs, LIDs, widths, speeds),
reused by fabric operations; `graph_from_ibnetdiscover` turns it into a FabricGraph, inferring
leaf/spine/core ranks from where the CAs hang. Malformed input raises ParseError with the line.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from dataclasses import dataclass, field

from designer.catalogue import LANE_GBPS, Catalogue, NodeType, SwitchModel
from designer.errors import ParseError
from designer.graph import FabricGraph, Link, Node, Switch

_HEADER = re.compile(r'^(Switch|Ca|Hca|Rt)\s+(\d+)\s+"([^"]+)"\s*(?:#\s*(.*))?$')
_PORT = re.compile(
    r"^\[(\d+)\](?:\[ext (\d+)\])?(?:\(([0-9a-fA-F]+)\))?\s+"
    r'"([^"]+)"\[(\d+)\](?:\[ext \d+\])?(?:\(([0-9a-fA-F]+)\))?\s*(?:#\s*(.*))?$'
)
_ASSIGN = re.compile(
    r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid|hcaguids?)\s*=\s*"
    r"(0x[0-9a-fA-F]+|\d+)(?:\(([0-9a-fA-F]+)\))?\s*$"
)
_DESC = re.compile(r'^"([^"]*)"\s*(.*)$')
_LID = re.compile(r"\blid (\d+)")
_LMC = re.compile(r"\blmc (\d+)")
_RATE = re.compile(r"\b(\d+)x([A-Z]+\d*)\b")
_MF0 = re.compile(r"^MF0;([^:]+):M?([A-Za-z0-9_-]+?)(?:/U\d+)?$")
_HOST_HCA = re.compile(r"^(\S+)\s+(\S+)$")
_HCA_NUM = re.compile(r"(\d+)$")
_IGNORED = ("Non-Chassis Nodes", "Chassis", "include", "do ", "module", "width", "speed", "pdebug", "ext ")
_KIND = {"Switch": "Switch", "Ca": "Ca", "Hca": "Ca", "Rt": "Rt"}


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
        if self.width is None or self.speed not in LANE_GBPS:
            return None
        return self.width * LANE_GBPS[self.speed]


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


@dataclass
class Discovery:
    """Everything one ibnetdiscover run reported."""

    nodes: list[IbNode]

    def by_id(self) -> dict[str, IbNode]:
        return {n.node_id: n for n in self.nodes}

    @property
    def switches(self) -> list[IbNode]:
        return [n for n in self.nodes if n.kind == "Switch"]

    @property
    def cas(self) -> list[IbNode]:
        return [n for n in self.nodes if n.kind == "Ca"]

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


def _int(text: str) -> int:
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def _guid_from_id(node_id: str) -> int | None:
    m = re.match(r"^[SHR]-([0-9a-fA-F]{1,16})$", node_id)
    return int(m.group(1), 16) if m else None


def _parse_comment(comment: str, port: IbPort, is_ca: bool) -> None:
    text = comment or ""
    if is_ca and not text.startswith('"'):
        m = _LID.match(text) or _LID.search(text.split('"', 1)[0])
        if m:
            port.lid = int(m.group(1))
        m = _LMC.search(text.split('"', 1)[0])
        if m:
            port.lmc = int(m.group(1))
    if '"' in text:
        head, _, rest = text.partition('"')
        desc, _, tail = rest.partition('"')
        port.peer_desc = desc
        text = tail
    m = _LID.search(text)
    if m:
        port.peer_lid = int(m.group(1))
    m = _RATE.search(text)
    if m:
        port.width, port.speed = int(m.group(1)), m.group(2)


def parse_ibnetdiscover(text: str) -> Discovery:
    """Parse ibnetdiscover (or ibsim net file) text; ParseError names the line."""
    nodes: list[IbNode] = []
    pending: dict[str, tuple[int, int | None]] = {}
    current: IbNode | None = None
    ids: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            current = None
            continue
        if line.startswith("#"):
            continue
        if line.startswith("["):
            if current is None:
                raise ParseError("port line outside a Switch/Ca record", line=lineno, text=raw)
            m = _PORT.match(line)
            if not m:
                raise ParseError(
                    'malformed port line: expected [port](guid) "peer-id"[peer-port] # …',
                    line=lineno,
                    text=raw,
                )
            port = IbPort(int(m.group(1)), m.group(4), int(m.group(5)), line=lineno)
            if m.group(2):
                port.ext_port = int(m.group(2))
            if m.group(3):
                port.port_guid = int(m.group(3), 16)
            if m.group(6):
                port.peer_port_guid = int(m.group(6), 16)
            if not 0 <= port.port <= current.nports or port.peer_port < 0:
                raise ParseError(
                    f"port {port.port} outside 1..{current.nports} of {current.node_id}",
                    line=lineno,
                    text=raw,
                )
            _parse_comment(m.group(7) or "", port, current.kind != "Switch")
            if any(p.port == port.port for p in current.ports):
                raise ParseError(f"port {port.port} of {current.node_id} listed twice", line=lineno, text=raw)
            current.ports.append(port)
            continue
        m = _ASSIGN.match(line)
        if m:
            key, value, extra = m.group(1), _int(m.group(2)), m.group(3)
            pending[key] = (value, int(extra, 16) if extra else None)
            current = None
            continue
        m = _HEADER.match(line)
        if m:
            kind = _KIND[m.group(1)]
            node = IbNode(kind, int(m.group(2)), m.group(3), line=lineno)
            if node.nports <= 0:
                raise ParseError("a node needs at least one port", line=lineno, text=raw)
            if node.node_id in ids:
                raise ParseError(f"{node.node_id} already defined on line {ids[node.node_id]}", line=lineno, text=raw)
            ids[node.node_id] = lineno
            comment = m.group(4) or ""
            d = _DESC.match(comment)
            if d:
                node.desc, rest = d.group(1), d.group(2)
            else:
                node.desc, rest = comment, ""
            if rest:
                node.enhanced_port0 = "enhanced port 0" in rest
                lid = _LID.search(rest)
                lmc = _LMC.search(rest)
                node.lid = int(lid.group(1)) if lid else None
                node.lmc = int(lmc.group(1)) if lmc else None
            guid_key = {"Switch": "switchguid", "Ca": "caguid", "Rt": "rtguid"}[kind]
            if guid_key in pending:
                node.guid, node.port_guid = pending[guid_key]
            elif kind == "Ca" and "hcaguids" in pending:
                node.guid = pending["hcaguids"][0]
            if node.guid is None:
                node.guid = _guid_from_id(node.node_id)
            node.vendid = pending.get("vendid", (None, None))[0]
            node.devid = pending.get("devid", (None, None))[0]
            node.sysimgguid = pending.get("sysimgguid", (None, None))[0]
            pending = {}
            nodes.append(node)
            current = node
            continue
        if line.startswith(_IGNORED):
            current = None
            continue
        raise ParseError(
            "unrecognised line: expected a Switch/Ca header, a [port] line, key=value or comment",
            line=lineno,
            text=raw,
        )
    if not nodes:
        raise ParseError("no Switch or Ca records found")
    _check_consistency(nodes)
    return Discovery(nodes)


def _check_consistency(nodes: list[IbNode]) -> None:
    by_id = {n.node_id: n for n in nodes}
    for node in nodes:
        for p in node.ports:
            peer = by_id.get(p.peer_id)
            if peer is None:
                continue  # partial output (e.g. a filtered dump): the link is simply dropped
            back = next((q for q in peer.ports if q.port == p.peer_port), None)
            if back is not None and (back.peer_id, back.peer_port) != (node.node_id, p.port):
                raise ParseError(
                    f"{node.node_id}[{p.port}] points to {p.peer_id}[{p.peer_port}], which "
                    f"points to {back.peer_id}[{back.peer_port}]",
                    line=p.line,
                )


def _switch_name_and_model(desc: str) -> tuple[str, str | None]:
    m = _MF0.match(desc)
    if m:
        return m.group(1), m.group(2)
    return desc, None


def graph_from_ibnetdiscover(
    source: str | Discovery, catalogue: Catalogue, *, topology: str = "imported"
) -> FabricGraph:
    """A FabricGraph from discovery; unknown switch/HCA types are added to a catalogue copy."""
    disc = parse_ibnetdiscover(source) if isinstance(source, str) else source
    cat = catalogue.copy()
    graph = FabricGraph(cat, topology)
    dev_of: dict[str, tuple[str, int]] = {}  # node_id → (device, node port offset) for switches
    names_used: set[str] = set()
    rates: dict[str, tuple[str, float]] = {}
    for node in disc.nodes:
        for p in node.ports:
            if p.speed and p.rate_gbps:
                rates.setdefault(node.node_id, (p.speed, p.rate_gbps))
    for i, node in enumerate(disc.switches):
        name, hint = _switch_name_and_model(node.desc or node.node_id)
        if not name or name in names_used:
            name = f"{name or 'switch'}-{(node.guid or i):x}"
        names_used.add(name)
        model, split = _match_model(cat, node, hint, rates.get(node.node_id))
        guid = node.guid if node.guid is not None else i
        graph.switches[name] = Switch(name, model, "leaf", guid, split=split)
        dev_of[node.node_id] = (name, 0)
    hosts: dict[str, list[tuple[int, IbNode, int]]] = defaultdict(list)
    for node in disc.cas:
        m = _HOST_HCA.match(node.desc)
        host, hca = (m.group(1), m.group(2)) if m else (node.desc or node.node_id, "")
        connected = sorted({p.port for p in node.ports}) or [1]
        num = _HCA_NUM.search(hca)
        for ca_port in connected:
            order = int(num.group(1)) if num else len(hosts[host])
            hosts[host].append((order, node, ca_port))
    ca_port_map: dict[tuple[str, int], tuple[str, int]] = {}
    for host, members in hosts.items():
        members.sort(key=lambda t: (t[0], t[1].guid or 0, t[2]))
        name = host if host not in names_used else f"{host}-ca"
        names_used.add(name)
        speed, gbps = rates.get(members[0][1].node_id, ("NDR", 400))
        type_name = f"imported-{speed}-{int(gbps)}"
        if type_name not in cat.nodes:
            cat.nodes[type_name] = NodeType(type_name, 0, 1, "", 0, 0, speed, int(gbps))
        ca_guids, port_guids, ca_ports, hca_names = [], [], [], []
        for idx, (_, ca, ca_port) in enumerate(members, 1):
            port = next((p for p in ca.ports if p.port == ca_port), None)
            guid = ca.guid if ca.guid is not None else 0
            ca_guids.append(guid)
            port_guids.append(port.port_guid if port and port.port_guid else guid + ca_port)
            ca_ports.append(ca_port)
            m = _HOST_HCA.match(ca.desc)
            hca_names.append(m.group(2) if m else f"HCA-{idx}")
            ca_port_map[(ca.node_id, ca_port)] = (name, idx)
        graph.nodes[name] = Node(
            name,
            type_name,
            tuple(ca_guids),
            tuple(port_guids),
            tuple(ca_ports),
            tuple(range(len(members))),
            hca_names=tuple(hca_names),
        )
    links: list[Link] = []
    for node, port, peer, peer_port in disc.links():
        ends = []
        for n, port_no in ((node, port.port), (peer, peer_port)):
            if n.kind == "Switch":
                ends.append((dev_of[n.node_id][0], port_no))
            elif (n.node_id, port_no) in ca_port_map:
                ends.append(ca_port_map[(n.node_id, port_no)])
        if len(ends) == 2:
            links.append(Link(ends[0][0], ends[0][1], ends[1][0], ends[1][1], ""))
    graph.links = links
    _infer_tiers(graph)
    return graph


def _match_model(
    cat: Catalogue, node: IbNode, hint: str | None, rate: tuple[str, float] | None
) -> tuple[str, str | None]:
    if hint and hint in cat.switches:
        model = cat.switches[hint]
        if node.nports == model.ports:
            return model.name, None
        for mode, (ports, _) in model.split_modes.items():
            if ports == node.nports:
                return model.name, mode
    for model in cat.switches.values():
        if model.device_id == node.devid and model.ports == node.nports:
            return model.name, None
    speed, gbps = rate or ("NDR", 400.0)
    name = f"imported-{node.devid or 0:x}-{node.nports}"
    if name not in cat.switches:
        cat.switches[name] = SwitchModel(
            name,
            node.nports,
            node.nports,
            speed,
            int(gbps),
            vendor_id=node.vendid or 0x2C9,
            device_id=node.devid or 0,
            description="discovered, not in the catalogue",
        )
    return name, None


def _infer_tiers(graph: FabricGraph) -> None:
    """Rank switches by distance from the CAs: leaf, spine, core, tier3…; orient links up."""
    switches = graph.switches
    adjacency: dict[str, set[str]] = defaultdict(set)
    leaves: set[str] = set()
    for lk in graph.links:
        a_sw, b_sw = lk.a in switches, lk.b in switches
        if a_sw and b_sw:
            adjacency[lk.a].add(lk.b)
            adjacency[lk.b].add(lk.a)
        elif a_sw:
            leaves.add(lk.a)
        elif b_sw:
            leaves.add(lk.b)
    rank = {s: 0 for s in leaves}
    queue = deque(sorted(leaves))
    while queue:
        cur = queue.popleft()
        for nxt in adjacency[cur]:
            if nxt not in rank:
                rank[nxt] = rank[cur] + 1
                queue.append(nxt)
    names = ("leaf", "spine", "core")
    for sw in switches.values():
        r = rank.get(sw.name, 0)
        sw.tier = names[r] if r < 3 else f"tier{r}"
    same_rank = False
    for lk in graph.links:
        ra = rank.get(lk.a, -1) if lk.a in switches else -1
        rb = rank.get(lk.b, -1) if lk.b in switches else -1
        if rb < ra:
            lk.a, lk.a_port, lk.b, lk.b_port = lk.b, lk.b_port, lk.a, lk.a_port
        if ra == rb and ra >= 0:
            same_rank = True
        lk.tier = graph.link_tier(lk.a, lk.b)
    graph.meta["levels"] = (max(rank.values()) + 1) if rank else 0
    if not same_rank and graph.meta["levels"] <= 3:
        graph.meta["routing"] = "ftree"
