"""2D/3D tori with wrap-around: one switch per coordinate, hosts on the low ports."""

from __future__ import annotations

import itertools
import math

from designer.catalogue import Catalogue
from designer.errors import PlanError
from designer.generators.common import Builder
from designer.graph import FabricGraph, Link
from designer.layout import Cell, FloorPlan, alternate_row, assign_cables
from designer.options import ResolvedOptions, parse_dims

AXES = "xyz"


def ring_links(size: int) -> int:
    """Links each switch spends on one dimension: a ring of 3+, one link for 2, none for 1."""
    return 2 if size >= 3 else (1 if size == 2 else 0)


def near_cubic_dims(switches: int) -> tuple[int, int, int]:
    """The most cube-like AxBxC (A ≥ B ≥ C) with at least `switches` switches, fewest first."""
    best: tuple[int, int, int, int] | None = None
    top = int(round(switches ** (1 / 3))) + 3
    for c in range(1, top + 1):
        for b in range(c, max(c, int(math.isqrt(max(1, switches // c)))) + 3):
            a = max(b, -(-switches // (b * c)))
            key = (a * b * c, a - c, a, b)
            if best is None or key < best:
                best = key
    assert best is not None
    total, _, a, b = best
    return a, b, total // (a * b)


def build_torus(ro: ResolvedOptions, catalogue: Catalogue) -> FabricGraph:
    """A torus sized by dims and hosts per switch (either may be derived from the other)."""
    ports = ro.ports
    endpoints = ro.endpoints
    dims = parse_dims(ro.options.dims)
    hosts = ro.options.hosts_per_switch
    if dims is None:
        hosts = hosts or ports // 2
        dims = near_cubic_dims(-(-endpoints // hosts))
    elif hosts is None:
        hosts = -(-endpoints // math.prod(dims))
    if len(dims) == 2:
        dims = (*dims, 1)
    spent = sum(ring_links(d) for d in dims)
    shown = "x".join(map(str, dims))
    if hosts + spent > ports:
        raise PlanError(
            f"a {shown} torus switch needs {hosts + spent} ports ({hosts} hosts + {spent} torus "
            f"links), {ro.switch.name} has {ports}: use at most {ports - spent} hosts per switch "
            f"or a bigger torus",
            element="hosts_per_switch",
        )
    capacity = math.prod(dims) * hosts
    if capacity < endpoints:
        need = near_cubic_dims(-(-endpoints // hosts))
        raise PlanError(
            f"a {shown} torus with {hosts} hosts per switch holds {capacity:,} endpoints, "
            f"{endpoints:,} requested: use {'x'.join(map(str, need))} or more hosts per switch",
            element="dims",
        )
    b = Builder(ro, catalogue, "torus")
    links = b.links
    names: dict[tuple[int, ...], str] = {}  # (x, y, z) → switch name
    for i, (x, y, z) in enumerate(itertools.product(*(range(d) for d in dims))):
        names[(x, y, z)] = b.switch(f"sw-{x:02d}-{y:02d}-{z:02d}", "torus", index=i, coords=(x, y, z))
    order = list(names.values())
    node_names: list[list[str]] = [[] for _ in order]
    wn = max(3, len(str(ro.nodes)))
    endpoint = 0
    for i in range(ro.nodes):
        node = b.node(f"node-{i + 1:0{wn}d}", ro.node_type, gpus=ro.gpus_per_node, hcas=ro.hcas_per_node)
        node_names[endpoint // hosts].append(node.name)
        for h in range(node.hcas):
            links.append(Link(node.name, h + 1, order[endpoint // hosts], endpoint % hosts + 1, "node_switch"))
            endpoint += 1
    port = hosts + 1
    for axis, size in enumerate(dims):
        if size < 2:
            continue
        for coord, name in names.items():
            if size == 2 and coord[axis] == 1:
                continue
            nxt = list(coord)
            nxt[axis] = (coord[axis] + 1) % size
            links.append(Link(name, port, names[tuple(nxt)], port + 1, f"torus_{AXES[axis]}"))
        port += 2
    b.graph.meta.update(
        dims=list(dims),
        hosts_per_switch=hosts,
        routing="torus-2QoS",
        options=ro.options.as_dict(),
        oversubscription=None,
    )
    plan = FloorPlan(b.graph)
    by_switch = dict(zip(order, node_names, strict=True))
    for line, (y, z) in enumerate(itertools.product(range(dims[1]), range(dims[2]))):
        cells = [Cell(by_switch[names[(x, y, z)]], [names[(x, y, z)]]) for x in range(dims[0])]
        plan.row(alternate_row(line), cells, [])
    assign_cables(b.graph)
    return b.graph
