"""Import ibnetdiscover output (real fabrics, ibsim, or our own export) as a fabric graph.

``parse_ibnetdiscover`` reads the text (topology output, ``-g`` grouped, ``-p`` ports report, ibsim
net file) into a :class:`Discovery`; ``import_fabric`` adds the node-name map, the inference
(tiers, rails, SUs, oversubscription, imbalance, rates) and builds the :class:`FabricGraph`, with
every finding kept. ``graph_from_ibnetdiscover`` is the graph alone. Discovery and compare call
the same functions. Malformed input raises ParseError with the line.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from designer.catalogue import Catalogue, NodeType, SwitchModel
from designer.graph import FabricGraph, Link, Node, Switch
from designer.imports.host_types import HostTypes, parse_host_types
from designer.imports.infer import Inference, hca_index, host_and_hca, infer, shared_descriptions
from designer.imports.model import Discovery, Finding, IbNode, IbPort, switch_desc
from designer.imports.namemap import apply_node_name_map, read_node_name_map
from designer.imports.ports_report import read_ports_report
from designer.imports.reader import is_ports_report, read_topology

__all__ = [
    "Discovery",
    "FabricImport",
    "IbNode",
    "IbPort",
    "Progress",
    "graph_from_ibnetdiscover",
    "import_fabric",
    "parse_ibnetdiscover",
]


#: ``progress(step, percent)``: a long import saying which phase it is in.
Progress = Callable[[str, int], None]


def _silent(_step: str, _percent: int) -> None:
    pass


def parse_ibnetdiscover(text: str) -> Discovery:
    """Parse ibnetdiscover output (plain, ``-g``, ``-p``) or an ibsim net file; ParseError names the line."""
    return read_ports_report(text) if is_ports_report(text) else read_topology(text)


@dataclass
class FabricImport:
    """One import: the graph, what was discovered and inferred, and every finding."""

    graph: FabricGraph
    discovery: Discovery
    inference: Inference
    findings: list[Finding] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # ibnetdiscover node id → design name

    def report(self) -> dict[str, Any]:
        """The import's own JSON: counts, inference and the findings (full list)."""
        disc = self.discovery
        return {
            "source": disc.source,
            "switches": len(disc.switches),
            "hosts": len(self.graph.nodes),
            "hcas": self.graph.endpoints(),
            "links": len(self.graph.links),
            "aggregation_nodes": len(disc.aggregation_nodes),
            "chassis": self.graph.meta.get("chassis", []),
            **self.inference.as_dict(),
            "findings": [f.as_dict() for f in self.findings],
        }


def import_fabric(
    text: str | Discovery,
    catalogue: Catalogue,
    *,
    node_name_map: str | None = None,
    topology: str = "imported",
    host_types: str | None = None,
    progress: Progress | None = None,
) -> FabricImport:
    """Parse, name (with the node-name map), infer and build; ParseError names the bad line.
    ``host_types`` (:mod:`designer.imports.host_types`) says which hosts are which servers, so
    they come in with their GPUs. ``progress(step, percent)`` hears each phase start (the
    percentages are the phases' shares of a large dump's import, validation and save included)."""
    say = progress or _silent
    say("parsing the dump", 0)
    disc = parse_ibnetdiscover(text) if isinstance(text, str) else text
    findings = list(disc.findings)
    say("naming nodes and switches", 25)
    if node_name_map:
        names, map_findings = read_node_name_map(node_name_map)
        findings += map_findings
        apply_node_name_map(disc, names)
    cat = catalogue.copy()
    types = parse_host_types(host_types, cat) if host_types else HostTypes()
    graph = FabricGraph(cat, topology)
    names_of = _switches(graph, disc)
    say("inferring tiers, rails and scalable units", 30)
    inference = infer(disc, names_of)
    findings += inference.findings
    say("building the graph", 45)
    ca_port_map = _hosts(graph, disc, inference, names_of, types)
    _links(graph, disc, ca_port_map, names_of)
    _tiers(graph, disc, inference, names_of)
    return FabricImport(graph, disc, inference, findings, names_of)


def graph_from_ibnetdiscover(
    source: str | Discovery, catalogue: Catalogue, *, topology: str = "imported", node_name_map: str | None = None
) -> FabricGraph:
    """A FabricGraph from discovery; unknown switch/HCA types are added to a catalogue copy."""
    return import_fabric(source, catalogue, node_name_map=node_name_map, topology=topology).graph


def _switches(graph: FabricGraph, disc: Discovery) -> dict[str, str]:
    cat = graph.catalogue
    rates: dict[str, tuple[str, float]] = {}
    for node in disc.switches:
        for p in node.ports:
            if p.speed and p.rate_gbps:
                rates.setdefault(node.node_id, (p.speed, p.rate_gbps))
                break
    names_of: dict[str, str] = {}
    for i, node in enumerate(disc.switches):
        desc = switch_desc(node.desc or node.node_id)
        name = desc.name
        if not name or name in graph.switches:
            name = f"{name or 'switch'}-{(node.guid or i):x}"
        model, split = _match_model(cat, node, desc.model, rates.get(node.node_id))
        guid = node.guid if node.guid is not None else i
        graph.switches[name] = Switch(name, model, "leaf", guid, split=split)
        names_of[node.node_id] = name
    chassis = []
    for sysimg, asics in sorted(disc.chassis().items()):
        descs = [switch_desc(a.desc or a.node_id) for a in asics]
        roles = [_chassis_role(d.role, a.slot) for a, d in zip(asics, descs, strict=True)]
        chassis.append(
            {
                "name": descs[0].host if descs[0].model else f"chassis-{sysimg:x}",
                "guid": f"0x{sysimg:016x}",
                "model": descs[0].model or "",
                "asics": len(asics),
                "line": sorted(names_of[a.node_id] for a, r in zip(asics, roles, strict=True) if r == "line"),
                "spine": sorted(names_of[a.node_id] for a, r in zip(asics, roles, strict=True) if r == "spine"),
            }
        )
    if chassis:
        graph.meta["chassis"] = chassis
    return names_of


def _chassis_role(role: str, slot: str) -> str:
    """line/spine from an NVIDIA description, else from the ``-g`` slot line ("ISR9288 Line 2 Chip 1")."""
    if role:
        return role
    words = slot.split()
    return "line" if "Line" in words else "spine" if "Spine" in words else ""


def _hosts(
    graph: FabricGraph, disc: Discovery, inference: Inference, names_of: dict[str, str], types: HostTypes
) -> dict[tuple[str, int], tuple[str, int]]:
    cat = graph.catalogue
    cas = disc.cas
    shared = shared_descriptions(cas)
    leaf_of: dict[tuple[str, int], str] = {}
    for node, port, peer, peer_port in disc.links():
        if node.kind == "Ca" and peer.kind == "Switch":
            leaf_of[(node.node_id, port.port)] = peer.node_id
        elif peer.kind == "Ca" and node.kind == "Switch":
            leaf_of[(peer.node_id, peer_port)] = node.node_id
    hosts: dict[str, list[tuple[int, IbNode, int]]] = defaultdict(list)
    for node in cas:
        host, hca = host_and_hca(node, shared)
        num = hca_index(hca)
        for ca_port in sorted({p.port for p in node.ports}):
            order = num if num is not None else len(hosts[host])
            hosts[host].append((order, node, ca_port))
    ca_port_map: dict[tuple[str, int], tuple[str, int]] = {}
    for host, members in hosts.items():
        members.sort(key=lambda t: (t[0], t[1].guid or 0, t[2]))
        name = host if host not in graph.switches and host not in graph.nodes else f"{host}-ca"
        speed, gbps = "NDR", 400.0
        rated = next((p for p in members[0][1].ports if p.rate_gbps), None)
        if rated is not None and rated.speed:
            speed, gbps = rated.speed, rated.rate_gbps or gbps
        type_name = types.type_of(host) or f"imported-{speed}-{int(gbps)}"
        if type_name not in cat.nodes:
            cat.nodes[type_name] = NodeType(type_name, 0, 1, "", 0, 0, speed, int(gbps))
        ca_guids, port_guids, ca_ports, hca_names, rails = [], [], [], [], []
        su = -1
        for idx, (_, ca, ca_port) in enumerate(members, 1):
            ca_port_rec = next((p for p in ca.ports if p.port == ca_port), None)
            guid = ca.guid if ca.guid is not None else 0
            ca_guids.append(guid)
            port_guids.append(ca_port_rec.port_guid if ca_port_rec and ca_port_rec.port_guid else guid + ca_port)
            ca_ports.append(ca_port)
            hca_names.append(host_and_hca(ca, shared)[1] or f"HCA-{idx}")
            ca_port_map[(ca.node_id, ca_port)] = (name, idx)
            leaf = leaf_of.get((ca.node_id, ca_port), "")
            rails.append(inference.rails.get(leaf, -1))
            su = inference.su.get(leaf, su) if su < 0 else su
        graph.nodes[name] = Node(
            name,
            type_name,
            tuple(ca_guids),
            tuple(port_guids),
            tuple(ca_ports),
            tuple(rails) if inference.rails else tuple(range(len(members))),
            su=su,
            hca_names=tuple(hca_names),
            gpus=cat.nodes[type_name].gpus,
        )
    return ca_port_map


def _links(
    graph: FabricGraph, disc: Discovery, ca_port_map: dict[tuple[str, int], tuple[str, int]], names_of: dict[str, str]
) -> None:
    links: list[Link] = []
    for node, port, peer, peer_port in disc.links():
        ends = []
        for n, port_no in ((node, port.port), (peer, peer_port)):
            if n.kind == "Switch":
                ends.append((names_of[n.node_id], port_no))
            elif (n.node_id, port_no) in ca_port_map:
                ends.append(ca_port_map[(n.node_id, port_no)])
        if len(ends) == 2:
            links.append(Link(ends[0][0], ends[0][1], ends[1][0], ends[1][1], ""))
    graph.links = links


def _find_model(cat: Catalogue, hint: str) -> SwitchModel | None:
    """The catalogue model a description names, case-insensitively (``qm9700`` = ``QM9700``)."""
    if hint in cat.switches:
        return cat.switches[hint]
    folded = hint.casefold()
    return next((m for m in cat.switches.values() if m.name.casefold() == folded), None)


def _match_model(
    cat: Catalogue, node: IbNode, hint: str | None, rate: tuple[str, float] | None
) -> tuple[str, str | None]:
    # A SHARP switch reports one port more than its radix: the Aggregation Node's.
    sizes = (node.nports, node.nports - 1)
    model = _find_model(cat, hint) if hint else None
    if model is not None:
        if model.ports in sizes:
            return model.name, None
        for mode, (ports, _) in model.split_modes.items():
            if ports in sizes:
                return model.name, mode
    for model in cat.switches.values():
        if model.device_id == node.devid and model.ports in sizes and not model.modular:
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


def _tiers(graph: FabricGraph, disc: Discovery, inference: Inference, names_of: dict[str, str]) -> None:
    """Tiers from the inference; links oriented up; rails, SUs, SHARP and levels recorded."""
    rank: dict[str, int] = {}
    for node_id, name in names_of.items():
        sw = graph.switches[name]
        rank[name] = inference.rank.get(node_id, 0)
        sw.tier = inference.tier(node_id)
        if node_id in inference.rails:
            sw.index, sw.su = inference.rails[node_id], inference.su.get(node_id, -1)
    switches = graph.switches
    same_rank = False
    for lk in graph.links:
        ra = rank.get(lk.a, -1) if lk.a in switches else -1
        rb = rank.get(lk.b, -1) if lk.b in switches else -1
        if rb < ra:
            lk.a, lk.a_port, lk.b, lk.b_port = lk.b, lk.b_port, lk.a, lk.a_port
        if ra == rb and ra >= 0:
            same_rank = True
        lk.tier = graph.link_tier(lk.a, lk.b)
    graph.meta["levels"] = inference.levels
    if inference.sharp:
        graph.meta["sharp"] = sorted(names_of[s] for s in inference.sharp)
    if inference.rails:
        graph.meta["rails"] = len(set(inference.rails.values()))
    # Only a balanced tree is claimed for ftree: an imbalanced one is reported as findings with
    # counts (OpenSM would fall back to minhop), not turned into routing-rule errors.
    balanced = not any(f.code == "imbalance" for f in inference.findings)
    if not same_rank and inference.levels <= 3 and balanced:
        graph.meta["routing"] = "ftree"
