"""A gang spanning sites: the cost of its ring all-reduce and the sites and split it takes.

Cost model (one ring all-reduce of ``S`` bytes over ``n`` ranks, the nodes of each site
contiguous in the ring): the ring visits the sites in ring order, so ``k`` ring edges cross
between sites (``k = m`` for ``m >= 2`` sites, the ring closing from the last site back to the
first; ``k = 0`` on one site). A ring all-reduce is ``2(n-1)`` steps (reduce-scatter, then
all-gather), each sending ``S/n`` bytes over every ring edge, so each inter-site edge carries
``2(n-1)/n·S`` bytes per all-reduce and its time is those bytes at the link's bandwidth plus its
latency once per step: ``2(n-1)/n·S·8 / (bandwidth_gbps·10⁹) + latency_us·10⁻⁶·2(n-1)``. The
edges run in parallel (links are full duplex; with two sites the two edges are the two
directions of one link), so the slowest edge bounds the inter-site time of an all-reduce.
Intra-site edges are left out: they are the same whichever sites are chosen.

Choosing sites (:func:`plan_span`): the fewest sites that can hold the gang; among those, the
set whose best ring order has the smallest slowest-edge time, then the smallest total latency,
then nearest to ``near``, then lowest indices. The split fills sites nearest to ``near`` first
(largest free first without ``near``), so as few ranks as possible sit far from the data.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .sites import SiteChoice, SiteMap

#: The all-reduce size reported when the caller gives none: a 1 GiB gradient bucket.
DEFAULT_ALLREDUCE_BYTES = float(1 << 30)
#: Above this many sites in one ring, ring orders are found greedily instead of by permutation.
EXACT_RING_SITES = 7

#: ``place(ring)``: place the gang on exactly the sites of ``ring`` (engine callback), returning
#: nodes per site, or ``None`` when they cannot hold it.
PlaceOnSites = Callable[[tuple[int, ...]], Mapping[int, int] | None]


@dataclass(frozen=True, slots=True)
class LinkCrossing:
    """One inter-site ring edge ``src → dst``: the route it takes, the bytes it carries per
    all-reduce and its time (``inf`` over unconnected sites)."""

    src: int
    dst: int
    latency_us: float
    bandwidth_gbps: float
    bytes: float
    seconds: float


@dataclass(frozen=True, slots=True)
class RingCost:
    """The inter-site cost of one ring all-reduce of ``allreduce_bytes`` over ``ranks`` ranks
    on sites in ``ring`` order."""

    ring: tuple[int, ...]
    ranks: int
    allreduce_bytes: float
    crossings: tuple[LinkCrossing, ...]

    @property
    def k(self) -> int:
        """Inter-site ring edges."""
        return len(self.crossings)

    @property
    def seconds(self) -> float:
        """Inter-site time of one all-reduce: its slowest inter-site edge (0 on one site)."""
        return max((c.seconds for c in self.crossings), default=0.0)

    @property
    def total_latency_us(self) -> float:
        """Latency summed over the inter-site edges."""
        return sum(c.latency_us for c in self.crossings)

    def sentence(self, sites: SiteMap) -> str:
        """The cost as a tenant reads it."""
        if not self.crossings:
            return f"on one site ({sites.names[self.ring[0]]}): no all-reduce traffic between sites"
        steps = 2 * (self.ranks - 1)
        edges = ", ".join(f"{sites.names[c.src]}→{sites.names[c.dst]}" for c in self.crossings)
        slow = max(self.crossings, key=lambda c: c.seconds)
        head = (
            f"a ring all-reduce of {bytes_phrase(self.allreduce_bytes)} over {self.ranks} ranks crosses "
            f"{self.k} inter-site link{'s' if self.k != 1 else ''} ({edges}), each carrying "
            f"{bytes_phrase(slow.bytes)} per all-reduce"
        )
        if math.isinf(slow.seconds):
            return f"{head}; {sites.names[slow.src]} and {sites.names[slow.dst]} have no link between them"
        return (
            f"{head}; the slowest ({sites.names[slow.src]}→{sites.names[slow.dst]}) takes "
            f"{seconds_phrase(slow.seconds)}: {bytes_phrase(slow.bytes)} at {slow.bandwidth_gbps:g} Gb/s plus "
            f"{slow.latency_us:,.0f} µs × {steps} steps"
        )


def ring_cost(
    sites: SiteMap, ring: Sequence[int], ranks: int, allreduce_bytes: float = DEFAULT_ALLREDUCE_BYTES
) -> RingCost:
    """The cost of a ring all-reduce over ``ranks`` ranks laid out on the sites of ``ring`` in
    that order (see the module docstring)."""
    if ranks < 1:
        raise ValueError("a ring needs at least one rank")
    if not ring:
        raise ValueError("a ring needs at least one site")
    order = tuple(ring)
    per_edge = 2 * (ranks - 1) / ranks * allreduce_bytes
    steps = 2 * (ranks - 1)
    crossings: list[LinkCrossing] = []
    if len(order) > 1:
        for src, dst in zip(order, order[1:] + order[:1], strict=True):
            spec = sites.route(src, dst)
            if spec is None:
                crossings.append(LinkCrossing(src, dst, math.inf, 0.0, per_edge, math.inf))
                continue
            seconds = per_edge * 8 / (spec.bandwidth_gbps * 1e9) + spec.latency_us * 1e-6 * steps
            crossings.append(LinkCrossing(src, dst, spec.latency_us, spec.bandwidth_gbps, per_edge, seconds))
    return RingCost(order, ranks, allreduce_bytes, tuple(crossings))


def best_ring(
    sites: SiteMap, members: Sequence[int], ranks: int, allreduce_bytes: float = DEFAULT_ALLREDUCE_BYTES
) -> RingCost:
    """The ring order of ``members`` with the smallest slowest-edge time, then total latency
    (rings are equal up to rotation, so the lowest index leads)."""
    first, *rest = sorted(members)
    if len(members) > EXACT_RING_SITES:
        order = [first]
        left = set(rest)
        while left:
            nxt = min(left, key=lambda s: (sites.latency(order[-1], s), s))
            order.append(nxt)
            left.remove(nxt)
        return ring_cost(sites, order, ranks, allreduce_bytes)
    rings = (ring_cost(sites, (first, *perm), ranks, allreduce_bytes) for perm in itertools.permutations(rest))
    return min(rings, key=lambda c: (c.seconds, c.total_latency_us, c.ring))


@dataclass(frozen=True, slots=True)
class SpanPlan:
    """A gang split over sites: ``split`` is ``(site, nodes)`` in ring order, ``cost`` its ring
    all-reduce, ``explanation`` the sentence a tenant reads."""

    split: tuple[tuple[int, int], ...]
    cost: RingCost
    explanation: str

    @property
    def sites(self) -> tuple[int, ...]:
        """The sites, in ring order."""
        return tuple(site for site, _ in self.split)


def plan_span(
    sites: SiteMap,
    nodes: int,
    *,
    free: Mapping[int, int] | None = None,
    place: PlaceOnSites | None = None,
    near: int | None = None,
    gpus_per_node: int = 1,
    allreduce_bytes: float = DEFAULT_ALLREDUCE_BYTES,
) -> SpanPlan | None:
    """The sites and split of a gang of ``nodes`` nodes (ranks: ``nodes × gpus_per_node``).

    Give ``free`` (free nodes per candidate site) to split by counts, and/or ``place`` (engine
    callback) to have the engine place on each candidate set in turn, the first it can hold
    winning. Without ``free`` every site of ``sites`` is a candidate. ``None`` when no set of
    sites can hold the gang (or a set that could needs sites with no link between them).
    """
    if nodes < 1:
        raise ValueError("a gang has at least one node")
    candidates = sorted(free) if free is not None else list(range(len(sites)))
    ranks = nodes * gpus_per_node
    for size in range(1, len(candidates) + 1):
        sets = [c for c in itertools.combinations(candidates, size) if free is None or sum(free[s] for s in c) >= nodes]
        rings = [best_ring(sites, c, ranks, allreduce_bytes) for c in sets]
        rings = [r for r in rings if not math.isinf(r.seconds)]
        rings.sort(key=lambda r: (r.seconds, r.total_latency_us, _nearness(sites, near, r.ring), sorted(r.ring)))
        for ring in rings:
            counts = place(ring.ring) if place is not None else None
            if place is not None and counts is None:
                continue
            split = _split(sites, ring.ring, nodes, free, counts, near)
            return SpanPlan(split, ring, _explain(sites, split, ring, near))
    return None


def span_needed(choice: SiteChoice, *, now: float, patience: float | None) -> bool:
    """Whether a request that allows spanning should span: no single site can hold it, or the
    chosen one only after waiting longer than ``patience`` (seconds; ``None`` = 0)."""
    if choice.site is None or choice.start is None:
        return True
    return choice.start - now > max(0.0, patience or 0.0)


def _nearness(sites: SiteMap, near: int | None, ring: Sequence[int]) -> float:
    if near is None:
        return 0.0
    return sum(sites.latency(near, s) for s in ring)


def _split(
    sites: SiteMap,
    ring: tuple[int, ...],
    nodes: int,
    free: Mapping[int, int] | None,
    counts: Mapping[int, int] | None,
    near: int | None,
) -> tuple[tuple[int, int], ...]:
    if counts is not None:
        return tuple((s, counts.get(s, 0)) for s in ring if counts.get(s, 0) > 0)
    room = dict(free) if free is not None else dict.fromkeys(ring, nodes)
    if near is not None:
        rank = {s: i for i, s in enumerate(sites.order_from(near))}
        order = sorted(ring, key=lambda s: rank[s])
    else:
        order = sorted(ring, key=lambda s: (-room[s], s))
    taken: dict[int, int] = {}
    left = nodes
    for site in order:
        take = min(left, room[site])
        if take:
            taken[site] = take
        left -= take
    return tuple((s, taken[s]) for s in ring if s in taken)


def _explain(sites: SiteMap, split: Sequence[tuple[int, int]], cost: RingCost, near: int | None) -> str:
    parts = ", ".join(f"{n} node{'s' if n != 1 else ''} at {sites.names[s]}" for s, n in split)
    head = f"near {sites.names[near]}: " if near is not None else ""
    count = len(split)
    return f"{head}split over {count} site{'s' if count != 1 else ''} ({parts}); {cost.sentence(sites)}"


def bytes_phrase(n: float) -> str:
    """``1.00 GiB``, ``512.0 MiB``, ``300 B``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def seconds_phrase(s: float) -> str:
    """``0.68 s``, ``12.5 ms``."""
    return f"{s:.2f} s" if s >= 1 else f"{s * 1000:.1f} ms"
