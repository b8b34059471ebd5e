"""Designed vs discovered: which cables are missing, extra or miswired, and how to fix them.

Pure Python, no ORM: :func:`discovered_topology` maps one parsed ibnetdiscover run onto the
design's names (switches by the name in their node description ``MF0;<name>:M<model>``, HCAs by
``"<host> <hca>"`` and CA port, falling back to planned GUIDs), and :func:`compare_topology`
matches it with the design port by port.

A cable is identified by its two ports. For every designed cable:

- both ports carry it → present (then its rate is checked, unless the driver cannot report it);
- neither port carries anything → **missing**;
- one or both ports carry a different cable → **miswired** (with what was found there).

A discovered cable none of whose ports carries a designed cable is **extra**. The fix list is
ordered as an engineer works: pull the wrong cables, then plug the right ones, then check the
slow ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from designer.catalogue import generation_rank, width_speed
from designer.graph import FabricGraph
from designer.imports.ibnetdiscover import Discovery

_MF0 = re.compile(r"^MF0;([^:]+):")
_HOST_HCA = re.compile(r"^(\S+)\s+(\S+)$")

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
    """The switch's name from its node description (NVIDIA's ``MF0;<name>:M<model>/U1``)."""
    m = _MF0.match(description)
    return m.group(1) if m else description


def discovered_topology(disc: Discovery, graph: FabricGraph) -> dict[str, Any]:
    """The discovered fabric in the design's names, as stored on a DiscoveryRun.

    ``nodes``: one dict per switch/CA with its real GUID, LID(s) and the design name it maps to
    (``known`` False when the design has no such device). ``links``: compact
    ``[a, a_port, b, b_port, rate]`` rows, ``rate`` as ibnetdiscover prints it (``4xNDR``).
    """
    switch_by_guid = {sw.guid: sw.name for sw in graph.switches.values()}
    ca_port_index: dict[tuple[str, str, int], End] = {}
    by_port_guid: dict[int, End] = {}
    for node in graph.nodes.values():
        ports = node.ca_ports or (1,) * node.hcas
        for i, guid in enumerate(node.port_guids):
            ca_port_index[(node.name, node.hca_name(i + 1), ports[i])] = (node.name, i + 1)
            by_port_guid[guid] = (node.name, i + 1)
    end_of: dict[tuple[str, int], End] = {}
    nodes_out: list[dict[str, Any]] = []
    for ib in disc.nodes:
        if ib.kind == "Switch":
            name = switch_name(ib.desc or ib.node_id)
            if name not in graph.switches and ib.guid in switch_by_guid:
                name = switch_by_guid[ib.guid]
            known = name in graph.switches
            # A switch's ports keep their numbers; unknown switches keep their description.
            for p in ib.ports:
                end_of[(ib.node_id, p.port)] = (name, p.port)
            nodes_out.append(
                {
                    "name": name,
                    "kind": "switch",
                    "node_id": ib.node_id,
                    "guid": _hex(ib.guid),
                    "lid": ib.lid,
                    "known": known,
                }
            )
            continue
        m = _HOST_HCA.match(ib.desc)
        host, hca = (m.group(1), m.group(2)) if m else (ib.desc or ib.node_id, "")
        lids: dict[str, int | None] = {}
        known = False
        for p in ib.ports:
            end = ca_port_index.get((host, hca, p.port))
            if end is None and p.port_guid is not None:
                end = by_port_guid.get(p.port_guid)
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
            continue
        rate = f"{port.width}x{port.speed}" if port.width and port.speed else ""
        if not rate:
            back = next((q for q in peer.ports if q.port == peer_port), None)
            if back is not None and back.width and back.speed:
                rate = f"{back.width}x{back.speed}"
        links_out.append([a[0], a[1], b[0], b[1], rate])
    return {"nodes": nodes_out, "links": links_out}


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
    return f"{device} port {port}"


def _place(graph: FabricGraph, device: str) -> str:
    item = graph.switches.get(device) or graph.nodes.get(device)
    if item is None or not item.rack:
        return ""
    return f"{item.rack} U{item.u}" if item.u else item.rack


def _places(graph: FabricGraph, a: str, b: str) -> str:
    pa, pb = _place(graph, a), _place(graph, b)
    return f" (racks {pa or '?'} → {pb or '?'})" if pa or pb else ""


def _link_dict(a: End, b: End, **extra: Any) -> dict[str, Any]:
    return {"a": a[0], "a_port": a[1], "b": b[0], "b_port": b[1], "label": f"{a[0]}[{a[1]}] — {b[0]}[{b[1]}]", **extra}


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
