"""Validate any fabric graph — generated, imported or hand-edited — in one pass over its links.

Each finding names the element, what is wrong and what would fit. Repeated findings of one kind
are capped (MAX_PER_CODE) and summarised so a broken 16k-GPU edit stays readable.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from designer.catalogue import CableType, generation_rank
from designer.findings import MAX_PER_CODE, Collector, IbsimLimits, ValidationReport
from designer.graph import FORBIDDEN_NAME_CHARS, FabricGraph, Link

TREE_RANK = {"leaf": 0, "spine": 1, "core": 2}
Adjacency = dict[str, dict[str, int]]  # switch → neighbour → links


def validate(
    graph: FabricGraph, limits: IbsimLimits | None = None, *, max_per_code: int | None = MAX_PER_CODE
) -> ValidationReport:
    """Check ports, speeds, cables, reach, GUIDs, connectivity and routing-engine rules.

    ``max_per_code`` caps the findings listed per code (None lists all: the import's full list).
    """
    limits = limits or IbsimLimits()
    out = Collector(max_per_code)
    cat = graph.catalogue
    ports_of: dict[str, int] = {}
    speed_of: dict[str, tuple[str, int, bool, int]] = {}  # generation, Gb/s, split, rank
    for sw in graph.switches.values():
        model = cat.switches.get(sw.model)
        if model is None:
            out.add(
                "error",
                "unknown-model",
                sw.name,
                f"{sw.name} uses unknown switch model {sw.model!r}: choose one of {', '.join(sorted(cat.switches))}",
            )
            ports_of[sw.name], speed_of[sw.name] = 0, ("", 0, False, -1)
            continue
        split = sw.split
        if split and split not in model.split_modes:
            modes = ", ".join(model.split_modes) or "none"
            out.add(
                "error",
                "split-mismatch",
                sw.name,
                f"{sw.name} is set to split mode {split!r}, {model.name} offers {modes}",
            )
            split = None
        count, gbps = model.port_layout(split)
        ports_of[sw.name] = count
        speed_of[sw.name] = (model.speed, gbps, bool(split), generation_rank(model.speed))
        if count > limits.ports_per_node:
            out.add(
                "warning",
                "ibsim-limit",
                sw.name,
                f"{sw.name} has {count} ports; ibsim simulates at most "
                f"{limits.ports_per_node} per node: the lab cannot load this design",
            )
    for node in graph.nodes.values():
        nt = cat.nodes.get(node.node_type)
        ports_of[node.name] = node.hcas
        speed_of[node.name] = (
            (nt.hca_speed, nt.hca_gbps, False, generation_rank(nt.hca_speed)) if nt else ("", 0, False, -1)
        )
        if nt is None and node.node_type != "imported":
            out.add(
                "error",
                "unknown-model",
                node.name,
                f"{node.name} uses unknown node type {node.node_type!r}: choose one of {', '.join(sorted(cat.nodes))}",
            )
    for name in graph.iter_devices():
        bad = [c for c in name if c in FORBIDDEN_NAME_CHARS]
        if bad or len(name) > 64:
            out.add(
                "warning",
                "bad-name",
                name,
                f"{name!r} is not a usable IB node description (≤ 64 characters without "
                f"quotes, '#', '@', ';', ':' or spaces): exports may not load",
            )

    used: dict[tuple[str, int], str] = {}
    adjacency: Adjacency = defaultdict(dict)
    hosts_on: Counter[str] = Counter()
    cable_cache: dict[str, CableType | None] = {}
    fine: dict[tuple[str, str, bool], float] = {}  # (cable, generation, split) → usable reach
    for link in graph.links:
        ok = True
        for dev, port, other in ((link.a, link.a_port, link.b), (link.b, link.b_port, link.a)):
            dev_ports = ports_of.get(dev)
            if dev_ports is None:
                out.add(
                    "error",
                    "missing-device",
                    dev,
                    f"a cable goes from {other} to {dev}, which does not exist",
                )
                ok = False
                continue
            if dev_ports and not 1 <= port <= dev_ports:
                out.add(
                    "error",
                    "port-exhaustion",
                    f"{dev}[{port}]",
                    f"{dev} has no port {port}: it has {dev_ports} ports; move the cable from "
                    f"{other} to a free port or use a bigger model",
                )
                ok = False
            prev = used.get((dev, port))
            if prev is not None:
                out.add(
                    "error",
                    "port-reused",
                    f"{dev}[{port}]",
                    f"{dev}[{port}] is cabled twice (to {prev} and {other}): one port takes one cable",
                )
                ok = False
            used[(dev, port)] = other
        if not ok:
            continue
        a_sw, b_sw = link.a in graph.switches, link.b in graph.switches
        if a_sw and b_sw:
            adjacency[link.a][link.b] = adjacency[link.a].get(link.b, 0) + 1
            adjacency[link.b][link.a] = adjacency[link.b].get(link.a, 0) + 1
        elif a_sw:
            hosts_on[link.a] += 1
        elif b_sw:
            hosts_on[link.b] += 1
        else:
            out.add(
                "error",
                "node-to-node",
                f"{link.a}-{link.b}",
                f"{link.a} is cabled straight to {link.b}: nodes connect through switches",
            )
        sa, sb = speed_of[link.a], speed_of[link.b]
        if sa != sb and sa[0] and sb[0] and (sa[0] != sb[0] or sa[1] != sb[1]):
            ga, gbps_a, _, _ = sa
            gb, gbps_b, _, _ = sb
            slow = min((generation_rank(ga), gbps_a, ga), (generation_rank(gb), gbps_b, gb))
            out.add(
                "warning",
                "speed-mismatch",
                f"{link.a}-{link.b}",
                f"{link.a}[{link.a_port}] runs {ga} {gbps_a}G, {link.b}[{link.b_port}] "
                f"runs {gb} {gbps_b}G: the link trains at {slow[2]} {slow[1]}G",
            )
        gen = sa[0] if sa[3] <= sb[3] else sb[0]
        key = (link.cable, gen, sa[2] or sb[2])
        reach = fine.get(key)
        if reach is None:
            reach = _cable_ok(graph, *key)
            fine[key] = reach
        if link.length_m > reach:  # slow path: something is wrong with this cable
            _check_cable(graph, link, gen, sa[2] or sb[2], out, cable_cache)

    for node in graph.nodes.values():
        for p in range(1, node.hcas + 1):
            if (node.name, p) not in used:
                rail = node.rails[p - 1] + 1 if len(node.rails) >= p else p
                out.add(
                    "warning",
                    "unconnected-port",
                    f"{node.name}[{p}]",
                    f"{node.name} HCA {p} (rail {rail}) is not cabled: it cannot reach the fabric",
                )
    for name in graph.switches:
        if name not in adjacency and not hosts_on.get(name):
            out.add("warning", "isolated-switch", name, f"{name} has no cables: connect it or remove it")
    _check_guids(graph, out)
    _check_connected(graph, adjacency, hosts_on, out)
    if graph.meta.get("routing") == "ftree" or graph.topology in ("fat-tree", "rail-optimized"):
        _check_ftree(graph, adjacency, hosts_on, out)
    if graph.meta.get("dims"):
        _check_torus(graph, adjacency, out)
    _check_ibsim(graph, ports_of, limits, out)
    return out.finish()


def _cable_ok(graph: FabricGraph, name: str, generation: str, split: bool) -> float:
    """Longest run this cable passes every check on (-1: it never does)."""
    cable = graph.catalogue.cables.get(name) if name else None
    if cable is None or (generation and not cable.carries(generation)):
        return -1.0
    if cable.kind == "splitter" and not split:
        return -1.0
    return cable.reach_max_m + 1e-9


def _check_cable(
    graph: FabricGraph, link: Link, generation: str, split: bool, out: Collector, cache: dict[str, CableType | None]
) -> None:
    name = f"{link.a}[{link.a_port}]-{link.b}[{link.b_port}]"
    if not link.cable:
        best = graph.catalogue.cheapest_cable(generation, link.length_m) if generation else None
        fix = f": {best.name} reaches it" if best else ": no catalogue cable reaches it"
        out.add("warning", "no-cable", name, f"{name} ({link.length_m:g} m) has no cable type{fix}")
        return
    if link.cable not in cache:
        cache[link.cable] = graph.catalogue.cables.get(link.cable)
    cable = cache[link.cable]
    if cable is None:
        out.add("error", "unknown-model", name, f"{name} uses unknown cable type {link.cable!r}")
        return
    if generation and not cable.carries(generation):
        out.add(
            "error",
            "cable-speed",
            name,
            f"{name} runs {generation} but {cable.name} carries {cable.max_speed}: use a {generation} cable",
        )
    if link.length_m > cable.reach_max_m + 1e-9:
        best = graph.catalogue.cheapest_cable(generation or cable.max_speed, link.length_m)
        fix = f"use {best.name} (to {best.reach_max_m:g} m)" if best else "move the racks closer"
        out.add(
            "error",
            "cable-reach",
            name,
            f"{name} is {link.length_m:g} m but {cable.name} reaches {cable.reach_max_m:g} m: {fix}",
        )
    if cable.kind == "splitter" and not split:
        out.add(
            "error",
            "split-mismatch",
            name,
            f"{name} uses splitter {cable.name} but neither end is in a split mode: "
            f"set the switch to a split mode or use a straight cable",
        )


def _check_guids(graph: FabricGraph, out: Collector) -> None:
    owner: dict[int, str] = {}
    for sw in graph.switches.values():
        if sw.guid in owner:
            out.add(
                "error",
                "duplicate-guid",
                sw.name,
                f"{sw.name} has GUID {sw.guid:#018x}, already used by {owner[sw.guid]}",
            )
        owner[sw.guid] = sw.name
    for node in graph.nodes.values():
        cas = set()
        for ca, port in zip(node.ca_guids, node.port_guids, strict=False):
            if ca not in cas and ca in owner:
                out.add(
                    "error",
                    "duplicate-guid",
                    node.name,
                    f"{node.name} HCA GUID {ca:#018x} is already used by {owner[ca]}",
                )
            cas.add(ca)
            owner.setdefault(ca, node.name)
            if port != ca and port in owner and owner[port] != node.name:
                out.add(
                    "error",
                    "duplicate-guid",
                    node.name,
                    f"{node.name} port GUID {port:#018x} is already used by {owner[port]}",
                )
            owner.setdefault(port, node.name)


def _check_connected(graph: FabricGraph, adjacency: Adjacency, hosts_on: Counter[str], out: Collector) -> None:
    switches = [s for s in graph.switches if s in adjacency or hosts_on.get(s)]
    if not switches:
        return
    seen = {switches[0]}
    stack = [switches[0]]
    while stack:
        for nxt in adjacency.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    apart = [s for s in switches if s not in seen]
    if apart:
        out.add(
            "error",
            "partitioned",
            apart[0],
            f"the fabric is split: {apart[0]} (and {len(apart) - 1} other switch(es)) cannot "
            f"reach {switches[0]}; add inter-switch links",
        )


def _check_level(
    graph: FabricGraph, lower: list[str], upper_tier: str, adjacency: Adjacency, out: Collector, what: str
) -> None:
    """Every lower switch sends the same number of links to every upper switch of its pod."""
    switches = graph.switches
    multiplicities: Counter[int] = Counter()
    ups: dict[str, dict[str, int]] = {}
    for name in lower:
        up = {n: c for n, c in adjacency.get(name, {}).items() if switches[n].tier == upper_tier}
        ups[name] = up
        if not up:
            out.add(
                "error",
                "ftree-symmetry",
                name,
                f"{name} has no link to any {upper_tier}: it is cut off from the fabric",
            )
            continue
        counts = Counter(up.values())
        if len(counts) > 1:
            (many, _), (few, _) = counts.most_common(2)[0], counts.most_common(2)[-1]
            a = next(n for n, c in sorted(up.items()) if c == many)
            b = next(n for n, c in sorted(up.items()) if c == few)
            out.add(
                "error",
                "ftree-symmetry",
                name,
                f"{name} sends {up[a]} link(s) to {a} but {up[b]} to {b}: OpenSM ftree falls "
                f"back to minhop; every {what} must send the same number of links to every "
                f"{upper_tier}",
            )
        multiplicities[max(up.values())] += 1
    if len(multiplicities) > 1:
        usual = multiplicities.most_common(1)[0][0]
        odd = next(n for n, u in ups.items() if u and max(u.values()) != usual)
        out.add(
            "error",
            "ftree-symmetry",
            odd,
            f"{odd} sends {max(ups[odd].values())} link(s) per {upper_tier}, the other "
            f"{what}s send {usual}: make them equal",
        )
    # pods: lower switches sharing an upper switch must reach exactly the same upper set
    by_upper: dict[str, list[str]] = defaultdict(list)
    for name, up in ups.items():
        for u in up:
            by_upper[u].append(name)
    parent = {n: n for n in ups}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for members in by_upper.values():
        root = find(members[0])
        for m in members[1:]:
            parent[find(m)] = root
    pods: dict[str, set[str]] = defaultdict(set)
    for name, up in ups.items():
        pods[find(name)].update(up)
    for name, up in ups.items():
        if not up:
            continue
        missing = sorted(pods[find(name)] - set(up))
        if missing:
            out.add(
                "error",
                "ftree-symmetry",
                name,
                f"{name} has no link to {missing[0]}"
                f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}, which its "
                f"peers reach: connect it to all {len(pods[find(name)])} {upper_tier}s of "
                f"its pod or OpenSM ftree falls back to minhop",
            )


def _check_ftree(graph: FabricGraph, adjacency: Adjacency, hosts_on: Counter[str], out: Collector) -> None:
    switches = graph.switches
    by_tier: dict[str, list[str]] = defaultdict(list)
    for sw in switches.values():
        by_tier[sw.tier].append(sw.name)
    for name, count in hosts_on.items():
        if switches[name].tier != "leaf":
            out.add(
                "error",
                "ftree-ca-rank",
                name,
                f"{name} is a {switches[name].tier} with {count} node(s) cabled to it: ftree "
                f"needs every compute node on a leaf",
            )
    unknown = sorted(t for t in by_tier if t not in TREE_RANK)
    if unknown:
        out.add(
            "warning",
            "ftree-tier",
            by_tier[unknown[0]][0],
            f"tier {unknown[0]!r} is not leaf/spine/core: ftree symmetry not checked for it",
        )
    if by_tier.get("spine"):
        _check_level(graph, by_tier.get("leaf", []), "spine", adjacency, out, "leaf")
    if by_tier.get("core"):
        _check_level(graph, by_tier["spine"], "core", adjacency, out, "spine")


def _check_torus(graph: FabricGraph, adjacency: Adjacency, out: Collector) -> None:
    dims = [d for d in graph.meta["dims"]]
    torus = [s for s in graph.switches.values() if s.tier == "torus"]
    if len(torus) != math.prod(dims):
        out.add(
            "error",
            "torus-dims",
            "dims",
            f"dims {'x'.join(map(str, dims))} need {math.prod(dims)} torus switches, the "
            f"fabric has {len(torus)}: torus-2QoS will not recognise it",
        )
    want = sum(2 if d >= 3 else (1 if d == 2 else 0) for d in dims)
    for sw in torus:
        have = sum(adjacency.get(sw.name, {}).values())
        if have != want:
            out.add(
                "warning",
                "torus-dims",
                sw.name,
                f"{sw.name} has {have} torus links, a {'x'.join(map(str, dims))} torus needs "
                f"{want}: torus-2QoS routes around it but loses its deadlock guarantees",
            )


def _check_ibsim(graph: FabricGraph, ports_of: dict[str, int], limits: IbsimLimits, out: Collector) -> None:
    cas = {ca for n in graph.nodes.values() for ca in n.ca_guids}
    nodes = len(cas) + len(graph.switches)
    ports = sum(ports_of[s] + 1 for s in graph.switches) + sum(
        len(set(zip(n.ca_guids, n.ca_ports, strict=False))) for n in graph.nodes.values()
    )
    over = []
    if nodes > limits.nodes:
        over.append(f"-N {nodes}")
    if len(graph.switches) > limits.switches:
        over.append(f"-S {len(graph.switches)}")
    if ports > limits.ports:
        over.append(f"-P {ports}")
    if over:
        out.add(
            "warning",
            "ibsim-limit",
            "fabric",
            # ibsim counts every HCA as its own IB node, so a design of 256 servers with 8 HCAs each is
            # 2,048 + switches "nodes" to it: say so, or the figure reads as a contradiction of the node count.
            f"lab simulator only: ibsim would simulate {nodes:,} IB nodes ({len(cas):,} HCAs in "
            f"{len(graph.nodes):,} servers + {len(graph.switches):,} switches), {len(graph.switches):,} switches "
            f"and {ports:,} ports, above its defaults (-N {limits.nodes:,}, -S {limits.switches}, "
            f"-P {limits.ports:,}): start it with {' '.join(over)}",
        )
    endpoints = graph.endpoints()
    if endpoints > limits.lab_endpoints:
        out.add(
            "warning",
            "lab-size",
            "fabric",
            f"{endpoints:,} endpoints: lab fabrics here come up to about "
            f"{limits.lab_endpoints:,}; this design is checked without a lab",
        )
