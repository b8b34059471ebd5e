"""Cabling plan: one row per cable, port to port, with racks, cable type and length."""

from __future__ import annotations

from typing import NamedTuple

from designer.graph import FabricGraph


class CablingRow(NamedTuple):
    """One cable as an installer pulls it: from A (lower tier) to B."""

    cable_id: str
    tier: str
    a_rack: str
    a_u: int
    a_device: str
    a_port: str
    b_rack: str
    b_u: int
    b_device: str
    b_port: str
    cable_type: str
    length_m: float


HEADER = CablingRow._fields


def port_label(graph: FabricGraph, device: str, port: int) -> str:
    """Switch ports as "<port>" (cage/lane shown by the UI); HCAs by name, e.g. "HCA-3"."""
    node = graph.nodes.get(device)
    if node is not None:
        return node.hca_name(port)
    return str(port)


def cabling_plan(graph: FabricGraph) -> list[CablingRow]:
    """Rows in link order (generators emit tier by tier, SU by SU)."""
    place: dict[str, tuple[str, int]] = {}
    for sw in graph.switches.values():
        place[sw.name] = (sw.rack, sw.u)
    hca: dict[str, tuple[str, ...]] = {}
    for node in graph.nodes.values():
        place[node.name] = (node.rack, node.u)
        hca[node.name] = tuple(node.hca_name(p) for p in range(1, node.hcas + 1))
    width = max(5, len(str(len(graph.links))))
    rows: list[CablingRow] = []
    append = rows.append
    for i, lk in enumerate(graph.links, 1):
        ra, ua = place.get(lk.a, ("", 0))
        rb, ub = place.get(lk.b, ("", 0))
        pa = hca[lk.a][lk.a_port - 1] if lk.a in hca and lk.a_port <= len(hca[lk.a]) else str(lk.a_port)
        pb = hca[lk.b][lk.b_port - 1] if lk.b in hca and lk.b_port <= len(hca[lk.b]) else str(lk.b_port)
        append(CablingRow(f"C{i:0{width}d}", lk.tier, ra, ua, lk.a, pa, rb, ub, lk.b, pb, lk.cable, lk.length_m))
    return rows
