"""Designed vs discovered: which cables are missing, extra or miswired, and how to fix them.

Pure Python, no ORM. Discovery is read by the importer's parser (:mod:`designer.imports`), and
:func:`discovered_topology` maps it onto the design's names the way the import names a fabric:
switches by their node description (``MF0;<name>:M<model>``; a director's ASICs
``MF0;<chassis>:M<model>/<slot>/U<asic>`` as ``<chassis>/<slot>/U<asic>``), HCAs by
``"<host> <hca>"`` and CA port, after the operator's node-name map when one is given; a device
the names do not place is matched by its GUID (switch node GUID, HCA port GUID) instead. SHARP
Aggregation Nodes (a CA inside every SHARP-capable switch) are not hosts: they and their links
are counted, not compared. :func:`compare_topology` then matches the design port by port.

A cable is identified by its two ports. For every designed cable:

- both ports carry it → present (then its rate is checked, unless the driver cannot report it);
- neither port carries anything → **missing**;
- one or both ports carry a different cable → **miswired** (with what was found there).

A discovered cable none of whose ports carries a designed cable is **extra**. The fix list is
ordered as an engineer works: pull the wrong cables, then plug the right ones, then check the
slow ones. Ports of a director's ASICs are named by chassis and slot (``dir1 L03/U1 port 7``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from designer.catalogue import generation_rank, width_speed
from designer.graph import FabricGraph
from designer.imports.ibnetdiscover import Discovery
from designer.imports.infer import host_and_hca, shared_descriptions
from designer.imports.model import IbNode, director_place, switch_desc
from designer.imports.namemap import apply_node_name_map, read_node_name_map

End = tuple[str, int]
LinkKey = tuple[End, End]


def link_key(a: End, b: End) -> LinkKey:
    """Orientation-free identity of a cable."""
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True)
class SpeedPolicy:
    """Whether rates are compared; when not, why (shown to the operator)."""

    check: bool = True
    reason: str = ""


LAB_SPEED_POLICY = SpeedPolicy(
    False,
    "lab fabric: ibsim 0.10 reports every link as 4X SDR whatever the cable, so link speeds "
    "and widths are not compared (a real fabric's are)",
)


# -- discovery → design names --------------------------------------------------------------


def switch_name(description: str) -> str:
    """The switch's design name from its node description, as the import names it
    (``MF0;leaf1:MQM9700/U1`` → ``leaf1``, ``MF0;dir1:MCS8500/L03/U1`` → ``dir1/L03/U1``)."""
    return switch_desc(description).name


def device_label(name: str) -> str:
    """How findings name a device: a director ASIC by chassis and slot (``dir1 L03/U1``)."""
    place = director_place(name)
    return f"{place[0]} {place[1]}/U{place[2]}" if place else name


class _Namer:
    """Design names of discovered nodes: by name first, by GUID when the name places nothing;
    each design device is taken by one discovered node at most."""

    def __init__(self, disc: Discovery, graph: FabricGraph) -> None:
        self.graph = graph
        self.switch_by_guid = {sw.guid: sw.name for sw in graph.switches.values()}
        self.ca_port_index: dict[tuple[str, str, int], End] = {}
        self.by_port_guid: dict[int, End] = {}
        for node in graph.nodes.values():
            ports = node.ca_ports or (1,) * node.hcas
            for i, guid in enumerate(node.port_guids):
                self.ca_port_index[(node.name, node.hca_name(i + 1), ports[i])] = (node.name, i + 1)
                self.by_port_guid[guid] = (node.name, i + 1)
        self.shared = shared_descriptions(disc.cas)
        self.taken: set[str] = set()
        self.taken_ends: set[End] = set()

    def switch(self, ib: IbNode) -> tuple[str, bool]:
        name = switch_name(ib.desc or ib.node_id)
        if name not in self.graph.switches or name in self.taken:
            by_guid = self.switch_by_guid.get(ib.guid) if ib.guid is not None else None
            if by_guid is not None and by_guid not in self.taken:
                name = by_guid
            elif name in self.taken:
                name = f"{name} ({ib.node_id})"  # a second device with the same name: not the designed one
        known = name in self.graph.switches
        if known:
            self.taken.add(name)
        return name, known

    def ca_port(self, ib: IbNode, port: int, port_guid: int | None) -> End | None:
        host, hca = host_and_hca(ib, self.shared)
        end = self.ca_port_index.get((host, hca, port))
        if (end is None or end in self.taken_ends) and port_guid is not None:
            end = self.by_port_guid.get(port_guid)
        if end is None or end in self.taken_ends:
            return None
        self.taken_ends.add(end)
        return end


def discovered_topology(disc: Discovery, graph: FabricGraph, *, node_name_map: str | None = None) -> dict[str, Any]:
    """The discovered fabric in the design's names, as stored on a DiscoveryRun.

    ``nodes``: one dict per switch/CA with its real GUID, LID(s) and the design name it maps to
    (``known`` False when the design has no such device; director ASICs add ``chassis`` and
    ``slot``). ``links``: compact ``[a, a_port, b, b_port, rate]`` rows, ``rate`` as
    ibnetdiscover prints it (``4xNDR``). ``aggregation_nodes``: how many SHARP Aggregation Nodes
    were seen (neither nodes nor links here). ``node_name_map``: the map's text (rdma-core
    format), applied to the discovery before naming; NodeNameMapError names a bad line.
    """
    if node_name_map:
        apply_node_name_map(disc, read_node_name_map(node_name_map)[0])
    namer = _Namer(disc, graph)
    end_of: dict[tuple[str, int], End] = {}
    nodes_out: list[dict[str, Any]] = []
    for ib in disc.switches:
        name, known = namer.switch(ib)
        # A switch's ports keep their numbers; unknown switches keep their description.
        for p in ib.ports:
            end_of[(ib.node_id, p.port)] = (name, p.port)
        row: dict[str, Any] = {
            "name": name,
            "kind": "switch",
            "node_id": ib.node_id,
            "guid": _hex(ib.guid),
            "lid": ib.lid,
            "known": known,
        }
        place = director_place(name)
        if place is not None:
            row.update(chassis=place[0], slot=f"{place[1]}/U{place[2]}")
        nodes_out.append(row)
    for ib in disc.nodes:
        if ib.kind == "Switch" or ib.aggregation_node:
            continue
        lids: dict[str, int | None] = {}
        known = False
        for p in ib.ports:
            end = namer.ca_port(ib, p.port, p.port_guid)
            if end is None:
                end = (ib.desc or ib.node_id, p.port)
            else:
                known = True
            end_of[(ib.node_id, p.port)] = end
            lids[str(p.port)] = p.lid
        nodes_out.append(
            {
                "name": ib.desc or ib.node_id,
                "kind": "ca",
                "node_id": ib.node_id,
                "guid": _hex(ib.guid),
                "lids": lids,
                "known": known,
            }
        )
    links_out: list[list[Any]] = []
    for ib, port, peer, peer_port in disc.links():
        a = end_of.get((ib.node_id, port.port))
        b = end_of.get((peer.node_id, peer_port))
        if a is None or b is None:
            continue  # an Aggregation Node's link (or a peer the dump does not describe)
        rate = port.rate
        if not rate:
            back = next((q for q in peer.ports if q.port == peer_port), None)
            rate = back.rate if back is not None else ""
        links_out.append([a[0], a[1], b[0], b[1], rate])
    return {"nodes": nodes_out, "links": links_out, "aggregation_nodes": len(disc.aggregation_nodes)}


def _hex(guid: int | None) -> str | None:
    return f"0x{guid:016x}" if guid is not None else None


# -- the comparison ------------------------------------------------------------------------


@dataclass(frozen=True)
class DesignedLink:
    """One designed cable, oriented as the design draws it (lower tier first)."""

    a: End
    b: End
    cable: str
    rate: str


def designed_links(graph: FabricGraph) -> list[DesignedLink]:
    """Every cable of the design with its cable type and expected rate (as ibnetdiscover shows
    it: the slower end's generation and width)."""
    port_rate: dict[str, tuple[int, str, int]] = {}

    def rate_of(device: str) -> tuple[int, str, int]:
        cached = port_rate.get(device)
        if cached is None:
            gen, gbps = graph.port_gbps(device, 1)
            cached = port_rate[device] = (generation_rank(gen), gen, gbps)
        return cached

    out = []
    for lk in graph.links:
        if lk.a not in graph.switches and lk.a not in graph.nodes:
            continue
        if lk.b not in graph.switches and lk.b not in graph.nodes:
            continue
        ra, rb = rate_of(lk.a), rate_of(lk.b)
        slow = min(ra, rb)
        rate = width_speed(slow[1], min(ra[2], rb[2])) if slow[1] else ""
        out.append(DesignedLink((lk.a, lk.a_port), (lk.b, lk.b_port), lk.cable, rate))
    return out


def _peer(link: DesignedLink, end: End) -> End:
    return link.b if link.a == end else link.a


def _port_label(graph: FabricGraph, end: End) -> str:
    device, port = end
    node = graph.nodes.get(device)
    if node is not None and 1 <= port <= node.hcas:
        return f"{device} port {port} ({node.hca_name(port)})"
    return f"{device_label(device)} port {port}"


def _place(graph: FabricGraph, device: str) -> str:
    item = graph.switches.get(device) or graph.nodes.get(device)
    if item is None or not item.rack:
        return ""
    return f"{item.rack} U{item.u}" if item.u else item.rack


def _places(graph: FabricGraph, a: str, b: str) -> str:
    pa, pb = _place(graph, a), _place(graph, b)
    return f" (racks {pa or '?'} → {pb or '?'})" if pa or pb else ""


def _link_dict(a: End, b: End, **extra: Any) -> dict[str, Any]:
    out = {"a": a[0], "a_port": a[1], "b": b[0], "b_port": b[1]}
    for side, (device, _) in (("a", a), ("b", b)):
        place = director_place(device)
        if place is not None:  # a director ASIC: its chassis and slot
            out[f"{side}_chassis"], out[f"{side}_slot"] = place[0], f"{place[1]}/U{place[2]}"
    label = f"{device_label(a[0])}[{a[1]}] — {device_label(b[0])}[{b[1]}]"
    return {**out, "label": label, **extra}


def compare_topology(
    graph: FabricGraph,
    topology: dict[str, Any],
    *,
    speed: SpeedPolicy = SpeedPolicy(),
    designed: Iterable[DesignedLink] | None = None,
) -> dict[str, Any]:
    """Compare a stored discovered topology with the design; returns the compare document
    (``missing``, ``extra``, ``miswired``, ``mismatches``, ``fixes``, ``speed_check``,
    ``summary``, ``ok`` — routing and ids are added by the service)."""
    plan = list(designed) if designed is not None else designed_links(graph)
    designed_at: dict[End, DesignedLink] = {}
    for lk in plan:
        designed_at[lk.a] = lk
        designed_at[lk.b] = lk
    found_at: dict[End, End] = {}
    found_rate: dict[LinkKey, str] = {}
    for a_dev, a_port, b_dev, b_port, rate in topology.get("links", []):
        a, b = (a_dev, a_port), (b_dev, b_port)
        found_at[a] = b
        found_at[b] = a
        found_rate[link_key(a, b)] = rate
    missing: list[dict[str, Any]] = []
    miswired: list[dict[str, Any]] = []
    mismatches: list[dict[str, Any]] = []
    connect: list[str] = []
    check: list[str] = []
    wrong: dict[LinkKey, str] = {}
    matched = 0
    for lk in plan:
        key = link_key(lk.a, lk.b)
        if found_at.get(lk.a) == lk.b:
            matched += 1
            rate = found_rate.get(key, "")
            if speed.check and lk.rate and rate and rate.upper() != lk.rate.upper():
                mismatches.append(_link_dict(lk.a, lk.b, kind="rate", expected=lk.rate, found=rate, cable=lk.cable))
                check.append(
                    f"check the cable between {_port_label(graph, lk.a)} and "
                    f"{_port_label(graph, lk.b)}: it runs at {rate}, the design expects "
                    f"{lk.rate} ({lk.cable or 'cable'}); reseat or replace it"
                )
            continue
        with_cable = f" with {lk.cable}" if lk.cable else ""
        connect.append(
            f"connect {_port_label(graph, lk.a)} to {_port_label(graph, lk.b)}{with_cable}"
            f"{_places(graph, lk.a[0], lk.b[0])}"
        )
        found = [(end, found_at[end]) for end in (lk.a, lk.b) if end in found_at]
        if not found:
            missing.append(_link_dict(lk.a, lk.b, cable=lk.cable, expected_rate=lk.rate))
            continue
        miswired.append(_link_dict(lk.a, lk.b, cable=lk.cable, found=[_link_dict(x, y) for x, y in found]))
        for x, y in found:
            wrong.setdefault(
                link_key(x, y),
                f"disconnect {_port_label(graph, x)} from {_port_label(graph, y)} "
                f"(the design puts it on {_port_label(graph, _peer(designed_at[x], x))})",
            )
    extra: list[dict[str, Any]] = []
    for a_dev, a_port, b_dev, b_port, rate in topology.get("links", []):
        a, b = (a_dev, a_port), (b_dev, b_port)
        if a in designed_at or b in designed_at:
            continue  # reported as miswired (or present)
        extra.append(_link_dict(a, b, rate=rate))
        wrong.setdefault(
            link_key(a, b),
            f"disconnect the cable between {_port_label(graph, a)} and "
            f"{_port_label(graph, b)}: it is not in the design",
        )
    seen_devices = {n["name"] for n in topology.get("nodes", []) if n.get("kind") == "switch"}
    seen_devices |= {end[0] for end in found_at}
    designed_devices = list(graph.switches) + list(graph.nodes)
    summary = {
        "designed_links": len(plan),
        "discovered_links": len(topology.get("links", [])),
        "matched": matched,
        "missing_devices": [d for d in designed_devices if d not in seen_devices],
        "unknown_devices": sorted({n["name"] for n in topology.get("nodes", []) if not n.get("known")}),
    }
    fixes = list(wrong.values()) + connect + check
    return {
        "missing": missing,
        "extra": extra,
        "miswired": miswired,
        "mismatches": mismatches,
        "fixes": fixes,
        "speed_check": {"checked": speed.check, "reason": speed.reason},
        "summary": summary,
        "ok": not (missing or extra or miswired or mismatches),
    }
