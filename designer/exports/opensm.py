"""OpenSM inputs: ftree root/compute/IO GUID files, node-name map, torus-2QoS, opensm.conf."""

from __future__ import annotations

from designer.graph import FabricGraph

TOP_TIERS = ("core", "spine", "leaf")


def root_switches(graph: FabricGraph) -> list[str]:
    """The top tier of a tree (cores, else spines, else the single leaf)."""
    for tier in TOP_TIERS:
        names = [s.name for s in graph.switches.values() if s.tier == tier]
        if names:
            return names
    return []


def render_root_guids(graph: FabricGraph) -> str:
    return "".join(f"0x{graph.switches[n].guid:016x}\n" for n in root_switches(graph))


def _port_guids(graph: FabricGraph, role: str) -> str:
    return "".join(f"0x{g:016x}\n" for n in graph.nodes.values() if n.role == role for g in n.port_guids)


def render_cn_guids(graph: FabricGraph) -> str:
    """Compute-node port GUIDs (ftree cn_guid_file)."""
    return _port_guids(graph, "compute")


def render_io_guids(graph: FabricGraph) -> str:
    """Non-compute ports such as the fabric-manager appliance (ftree io_guid_file)."""
    return _port_guids(graph, "manager")


def render_node_name_map(graph: FabricGraph) -> str:
    lines = ["# node GUID → name (opensm node_name_map_name, ibnetdiscover --node-name-map)"]
    lines.extend(f'0x{s.guid:016x} "{s.name}"' for s in graph.switches.values())
    for node in graph.nodes.values():
        done: set[int] = set()
        for i, ca in enumerate(node.ca_guids):
            if ca not in done:
                done.add(ca)
                lines.append(f'0x{ca:016x} "{node.name} {node.hca_name(i + 1)}"')
    return "\n".join(lines) + "\n"


def render_torus_2qos(graph: FabricGraph) -> str:
    """torus-2QoS.conf: radices and a seed of links from the origin switch in every direction."""
    dims = list(graph.meta.get("dims") or [])
    if not dims:
        return "# not a torus: torus-2QoS does not apply to this design\n"
    dims = (dims + [1, 1])[:3]
    at = {tuple(s.coords): s for s in graph.switches.values() if s.tier == "torus" and s.coords}
    radix = " ".join(f"{d}" if d != 2 else "2m" for d in dims)
    lines = [f"# {graph.topology} {'x'.join(map(str, dims))}", f"torus {radix}"]
    origin = at.get((0, 0, 0))
    if origin is not None:
        for axis, size in enumerate(dims):
            if size < 2:
                continue
            plus = [0, 0, 0]
            plus[axis] = 1
            minus = [0, 0, 0]
            minus[axis] = size - 1
            p, m = at.get(tuple(plus)), at.get(tuple(minus))
            if p is not None:
                lines.append(f"{'xyz'[axis]}p_link 0x{origin.guid:016x} 0x{p.guid:016x}")
            if m is not None and size > 2:
                lines.append(f"{'xyz'[axis]}m_link 0x{origin.guid:016x} 0x{m.guid:016x}")
    return "\n".join(lines) + "\n"


def render_opensm_conf(graph: FabricGraph) -> str:
    """An opensm.conf fragment naming the routing engine and the files above."""
    etc = "/etc/opensm"
    lines = [f"# OpenSM settings for the planned {graph.topology} fabric"]
    if graph.meta.get("dims"):
        lines += ["routing_engine torus-2QoS,minhop", f"torus_config {etc}/torus-2QoS.conf"]
    elif graph.meta.get("routing") == "ftree":
        lines += [
            "routing_engine ftree",
            f"root_guid_file {etc}/root_guids.txt",
            f"cn_guid_file {etc}/cn_guids.txt",
        ]
        if any(n.role == "manager" for n in graph.nodes.values()):
            lines.append(f"io_guid_file {etc}/io_guids.txt")
    else:
        lines += ["routing_engine updn", f"root_guid_file {etc}/root_guids.txt"]
    lines.append(f"node_name_map_name {etc}/node-name-map")
    return "\n".join(lines) + "\n"
