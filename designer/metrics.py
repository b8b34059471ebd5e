"""Metrics of any fabric graph: counts per tier, optics, bandwidth, hops, power and cost.

Power and cost are the fabric's (switches, cables, optics); the servers' figures are reported
separately as `compute_power_w` / `compute_cost`. All money figures use catalogue list prices.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque

from designer.catalogue import generation_rank
from designer.graph import FabricGraph

EXACT_DIAMETER_SOURCES = 256


def _ratio(down: int, up: int) -> str:
    if up == 0:
        return f"{down}:0"
    g = math.gcd(down, up) or 1
    d, u = down // g, up // g
    if u != 1 and d % u:
        return f"{down / up:.2f}:1"
    return f"{d // u}:1" if d % u == 0 else f"{d}:{u}"


def link_gbps(graph: FabricGraph) -> list[int]:
    """Speed every link trains at (the slower end), in graph.links order."""
    cache: dict[str, tuple[int, int]] = {}

    def speed(dev: str) -> tuple[int, int]:
        hit = cache.get(dev)
        if hit is None:
            try:
                gen, gbps = graph.port_gbps(dev, 1)
            except KeyError:
                gen, gbps = "", 0
            hit = (generation_rank(gen), gbps)
            cache[dev] = hit
        return hit

    return [min(speed(lk.a)[1], speed(lk.b)[1]) for lk in graph.links]


def diameter(graph: FabricGraph) -> tuple[int | None, bool]:
    """Most inter-switch hops between two leaves (switches with nodes); (None, _) if split.

    Leaves with identical neighbour sets have identical distances, so one BFS per class
    suffices; beyond EXACT_DIAMETER_SOURCES classes a deterministic sample is used.
    """
    adjacency: dict[str, set[str]] = defaultdict(set)
    leaves: set[str] = set()
    switches = graph.switches
    for lk in graph.links:
        a_sw, b_sw = lk.a in switches, lk.b in switches
        if a_sw and b_sw:
            adjacency[lk.a].add(lk.b)
            adjacency[lk.b].add(lk.a)
        elif a_sw:
            leaves.add(lk.a)
        elif b_sw:
            leaves.add(lk.b)
    if len(leaves) <= 1:
        return 0, True
    classes: dict[frozenset[str], str] = {}
    for leaf in sorted(leaves):
        classes.setdefault(frozenset(adjacency.get(leaf, ())), leaf)
    sources = list(classes.values())
    exact = len(sources) <= EXACT_DIAMETER_SOURCES
    if not exact:
        step = len(sources) / EXACT_DIAMETER_SOURCES
        sources = [sources[int(i * step)] for i in range(EXACT_DIAMETER_SOURCES)]
    worst = 0
    for src in sources:
        dist = {src: 0}
        queue = deque([src])
        while queue:
            cur = queue.popleft()
            d = dist[cur] + 1
            for nxt in adjacency.get(cur, ()):
                if nxt not in dist:
                    dist[nxt] = d
                    queue.append(nxt)
        for leaf in leaves:
            hops = dist.get(leaf)
            if hops is None:
                return None, exact
            if hops > worst:
                worst = hops
    return worst, exact


def _bisection(graph: FabricGraph, speeds: list[int]) -> float:
    """Capacity (Gb/s, one direction) across a cut through the middle of the fabric."""
    cap: Counter[str] = Counter()
    for lk, gbps in zip(graph.links, speeds, strict=True):
        cap[lk.tier] += gbps
    host = sum(c for t, c in cap.items() if t.startswith("node_")) / 2
    candidates = [host]
    topo = graph.topology
    switches = graph.switches
    if topo == "torus" and graph.meta.get("dims"):
        dims = graph.meta["dims"]
        axis = max(range(len(dims)), key=lambda i: dims[i])
        half = dims[axis] / 2
        crossing = 0.0
        for lk, gbps in zip(graph.links, speeds, strict=True):
            if lk.tier == f"torus_{'xyz'[axis]}":
                ca, cb = switches[lk.a].coords[axis], switches[lk.b].coords[axis]
                if (ca < half) != (cb < half):
                    crossing += gbps
        candidates.append(crossing)
    elif topo == "dragonfly-plus":
        groups = graph.meta.get("groups", 1)
        crossing = 0.0
        for lk, gbps in zip(graph.links, speeds, strict=True):
            if lk.tier == "global":
                if (switches[lk.a].pod < groups / 2) != (switches[lk.b].pod < groups / 2):
                    crossing += gbps
        if groups > 1:
            candidates.append(crossing)
    else:
        for tier in ("leaf_spine", "spine_core"):
            if cap.get(tier):
                candidates.append(cap[tier] / 2)
    return float(min(candidates))


def _oversubscription(graph: FabricGraph) -> str | None:
    down: Counter[str] = Counter()
    up: Counter[str] = Counter()
    switches = graph.switches
    for lk in graph.links:
        if lk.a in graph.nodes and lk.b in switches:
            down[lk.b] += 1
        elif lk.b in graph.nodes and lk.a in switches:
            down[lk.a] += 1
        elif lk.a in switches and lk.b in switches and graph.topology != "torus":
            ta, tb = switches[lk.a].tier, switches[lk.b].tier
            if ta == "leaf" and tb != "leaf":
                up[lk.a] += 1
            elif tb == "leaf" and ta != "leaf":
                up[lk.b] += 1
    if graph.topology == "torus" or not down:
        return None
    if len(graph.switches) == 1:
        return "1:1"
    # A ratio needs uplinks: switches with hosts and none (an imported flat mesh, a leaf cut off:
    # the validation names those) are not "N:0"; with no uplinks at all there is no ratio to give.
    uplinked = [s for s in down if up[s]]
    if not uplinked:
        return None
    worst = max(uplinked, key=lambda s: (down[s] / up[s], s))
    return _ratio(down[worst], up[worst])


def compute_metrics(graph: FabricGraph) -> dict:
    """Every figure the summary, comparison and UI show, from the graph alone."""
    cat = graph.catalogue
    switches = graph.switches
    speeds = link_gbps(graph)
    sw_tiers = Counter(sw.tier for sw in switches.values())
    cable_tiers = Counter(lk.tier for lk in graph.links)
    cable_types = Counter(lk.cable or "unassigned" for lk in graph.links)
    cages: set[tuple[str, int, str]] = set()
    node_optics: Counter[str] = Counter()
    cable_cost = cable_power = 0.0
    cable_objs = {name: cat.cables.get(name) for name in cable_types}
    per_cage: dict[str, int] = {}
    for sw in switches.values():
        model = cat.switches.get(sw.model)
        if model:
            ports, _ = model.port_layout(sw.split if sw.split in model.split_modes else None)
            per_cage[sw.name] = max(1, ports // max(1, model.cages))
        else:
            per_cage[sw.name] = 1
    for name, count in cable_types.items():
        cable = cable_objs.get(name)
        if cable:
            cable_cost += cable.price * count
            cable_power += cable.power_w * count
    for lk in graph.links:
        cable = cable_objs.get(lk.cable)
        if cable is None or not cable.needs_transceiver:
            continue
        for dev, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
            if dev in switches:
                cages.add((dev, (port - 1) // per_cage[dev], cable.transceiver))
            else:
                node_optics[cable.transceiver] += 1
    optics = Counter(t for _, _, t in cages) + node_optics
    optic_cost = sum(cat.transceivers[t].price * n for t, n in optics.items() if t in cat.transceivers)
    optic_power = sum(cat.transceivers[t].power_w * n for t, n in optics.items() if t in cat.transceivers)
    switch_cost = switch_power = 0.0
    total_ports: Counter[str] = Counter()
    used_ports: Counter[str] = Counter()
    hop_latency = 0.0
    for sw in switches.values():
        model = cat.switches.get(sw.model)
        if model is None:
            continue
        switch_cost += model.list_price
        switch_power += model.power_w
        total_ports[sw.tier] += model.port_layout(sw.split if sw.split in model.split_modes else None)[0]
        hop_latency = max(hop_latency, model.hop_latency_ns)
    for lk in graph.links:
        for dev in (lk.a, lk.b):
            end = switches.get(dev)
            if end is not None:
                used_ports[end.tier] += 1
    compute_cost = compute_power = 0.0
    for node in graph.nodes.values():
        nt = cat.nodes.get(node.node_type)
        if nt:
            compute_cost += nt.price
            compute_power += nt.power_w
    hops, exact = diameter(graph)
    return {
        "switches": {**dict(sw_tiers), "total": len(switches)},
        "cables": {**dict(cable_tiers), "total": len(graph.links)},
        "cables_by_type": dict(sorted(cable_types.items())),
        "transceivers": sum(optics.values()),
        "transceivers_by_type": dict(sorted(optics.items())),
        "oversubscription": _oversubscription(graph),
        "bisection_bandwidth_gbps": _bisection(graph, speeds),
        "diameter_switch_hops": hops,
        "diameter_exact": exact,
        "max_latency_ns": (hops + 1) * hop_latency if hops is not None else None,
        "power_w": round(switch_power + optic_power + cable_power, 1),
        "power_breakdown_w": {
            "switches": switch_power,
            "transceivers": round(optic_power, 1),
            "cables": cable_power,
        },
        "cost": round(switch_cost + optic_cost + cable_cost, 2),
        "cost_breakdown": {
            "switches": switch_cost,
            "transceivers": optic_cost,
            "cables": cable_cost,
        },
        "compute_power_w": compute_power,
        "compute_cost": compute_cost,
        "port_utilisation": {t: round(used_ports[t] / total_ports[t], 4) for t in total_ports if total_ports[t]},
    }
