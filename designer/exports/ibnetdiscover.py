"""ibnetdiscover topology with planned GUIDs; loads directly as an ibsim net file.

`switchguid=`/`caguid=` lines before each node fix its GUIDs in ibsim (a CA's port GUID is its
node GUID + port number there, which is how planned HCA GUIDs are chosen). Switch descriptions
follow NVIDIA's "MF0;<name>:M<model>/U1" form so the model survives a round-trip; a director's
ASICs (design names ``<chassis>/<slot>/U<asic>``, as the import names them) are written as the
chassis shows them, ``MF0;<chassis>:M<chassis model>/<slot>/U<asic>`` with the chassis' system
image GUID (``sysimgguid=``, which ibsim keeps; ``switchguid=`` stays the ASIC's own), so an imported director fabric exports (and runs in the lab) as it was discovered.
Lines stay under ibsim's 256-character limit.
"""

from __future__ import annotations

from designer.catalogue import generation_rank, width_speed
from designer.graph import FabricGraph
from designer.imports.model import director_place


def switch_description(name: str, model: str, chassis_model: str | None = None) -> str:
    """NVIDIA's node description of a switch (of a director ASIC: chassis, slot and ASIC)."""
    place = director_place(name)
    if place is None:
        return f"MF0;{name}:M{model}/U1"
    chassis, slot, asic = place
    return f"MF0;{chassis}:M{chassis_model or model}/{slot}/U{asic}"


def _chassis_of(graph: FabricGraph) -> dict[str, tuple[str, int]]:
    """Director ASIC name → (chassis model, system image GUID), from the import's chassis records."""
    out: dict[str, tuple[str, int]] = {}
    for chassis in graph.meta.get("chassis", []):
        try:
            guid = int(str(chassis.get("guid", "")), 16)
        except ValueError:
            continue
        for name in [*chassis.get("line", []), *chassis.get("spine", [])]:
            out[name] = (str(chassis.get("model") or ""), guid)
    return out


def render_ibnetdiscover(graph: FabricGraph) -> str:
    cat = graph.catalogue
    switches = graph.switches
    nodes = graph.nodes
    ident: dict[str, str] = {}
    desc: dict[str, str] = {}
    speed: dict[str, tuple[int, str, int]] = {}
    chassis_of = _chassis_of(graph)
    for sw in switches.values():
        ident[sw.name] = f"S-{sw.guid:016x}"
        desc[sw.name] = switch_description(sw.name, sw.model, chassis_of.get(sw.name, ("", 0))[0])
        gen, gbps = graph.port_gbps(sw.name, 1)
        speed[sw.name] = (generation_rank(gen), gen, gbps)
    ca_end: dict[str, list[tuple[str, int, int, str]]] = {}
    for node in nodes.values():
        gen, gbps = graph.port_gbps(node.name, 1)
        speed[node.name] = (generation_rank(gen), gen, gbps)
        ports = node.ca_ports or (1,) * node.hcas
        ca_end[node.name] = [
            (f"H-{ca:016x}", ports[i], node.port_guids[i], f"{node.name} {node.hca_name(i + 1)}")
            for i, ca in enumerate(node.ca_guids)
        ]
    sw_lines: dict[str, list[tuple[int, str]]] = {name: [] for name in switches}
    ca_lines: dict[str, list[tuple[int, str]]] = {}
    labels: dict[tuple, str] = {}
    for lk in graph.links:
        ends = []
        for dev, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
            if dev in switches:
                ends.append((dev, True, ident[dev], port, "", desc[dev]))
            elif dev in ca_end and 1 <= port <= len(ca_end[dev]):
                cid, caport, pguid, cdesc = ca_end[dev][port - 1]
                ends.append((dev, False, cid, caport, f"({pguid:x})", cdesc))
            else:
                break
        if len(ends) != 2:
            continue  # dangling link: validation reports it
        sa, sb = speed.get(lk.a, (-1, "", 0)), speed.get(lk.b, (-1, "", 0))
        key = (sa, sb)
        label = labels.get(key)
        if label is None:
            slow = min(sa, sb)
            label = width_speed(slow[1], min(sa[2], sb[2])) if slow[1] else "4xSDR"
            labels[key] = label
        for mine, peer in ((ends[0], ends[1]), (ends[1], ends[0])):
            dev, is_sw, _, port, guid_text, _ = mine
            _, _, pid, pport, ppguid, pdesc = peer
            if is_sw:
                sw_lines[dev].append((port, f'[{port}]\t"{pid}"[{pport}]{ppguid}\t\t# "{pdesc}" lid 0 {label}'))
            else:
                ca_lines.setdefault(guid_text, []).append(
                    (
                        port,
                        f'[{port}]{guid_text}\t"{pid}"[{pport}]{ppguid}\t\t# lid 0 lmc 0 "{pdesc}" lid 0 {label}',
                    )
                )
    out = [
        "#",
        f"# Topology file: planned {graph.topology} fabric, {len(switches)} switches, "
        f"{sum(len(v) for v in ca_end.values())} CAs",
        "# Planned GUIDs (switchguid=/caguid=): load with ibsim or compare with ibnetdiscover",
        "#",
        "",
    ]
    append = out.append
    for sw in switches.values():
        model = cat.switches.get(sw.model)
        count = graph.port_count(sw.name)
        append("vendid=0x%x" % (model.vendor_id if model else 0x2C9))
        append("devid=0x%x" % (model.device_id if model else 0))
        sysimg = chassis_of.get(sw.name, ("", sw.guid))[1]
        append(f"sysimgguid=0x{sysimg:016x}")
        append(f"switchguid=0x{sw.guid:016x}({sw.guid:x})")
        append(f'Switch\t{count} "{ident[sw.name]}"\t\t# "{desc[sw.name]}" enhanced port 0 lid 0 lmc 0')
        lines = sw_lines[sw.name]
        lines.sort()
        out.extend(line for _, line in lines)
        append("")
    for node in nodes.values():
        nt = cat.nodes.get(node.node_type)
        devid = nt.hca_device_id if nt else 0x1021
        seen: dict[int, list[int]] = {}
        for i, ca in enumerate(node.ca_guids):
            seen.setdefault(ca, []).append(i)
        for ca, indices in seen.items():
            cid, _, _, cdesc = ca_end[node.name][indices[0]]
            nports = max(ca_end[node.name][i][1] for i in indices)
            append("vendid=0x2c9")
            append(f"devid=0x{devid:x}")
            append(f"sysimgguid=0x{ca:016x}")
            append(f"caguid=0x{ca:016x}")
            append(f'Ca\t{nports} "{cid}"\t\t# "{cdesc}"')
            lines = []
            for i in indices:
                lines.extend(ca_lines.get(f"({node.port_guids[i]:x})", ()))
            lines.sort()
            out.extend(line for _, line in lines)
            append("")
    return "\n".join(out)
