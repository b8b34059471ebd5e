"""Reclaim of borrowed capacity: the fewest borrowed bookings to preempt for a guaranteed request.

Tenants may borrow capacity beyond their guarantee while others leave it idle; when an owner then
claims guaranteed quota, the engine names the borrowed bookings that must give way. The set is
minimal in size (exact search over small candidate sets, greedy plus pruning beyond a budget),
ties broken by lowest priority, then fewest GPUs, so the least important, smallest borrowers go
first.

Feasibility of a candidate set is judged on counts (free nodes per leaf group, or free GPUs per
node for a share) with the same group choice as placement, so every subset test is cheap; the
final placement is then computed by the real search with those bookings ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from itertools import combinations

from .engine import PlacementEngine
from .selection import choose_groups
from .state import Booking
from .topology import NodeState
from .types import Placement, PlacementResult, Request

#: Subset feasibility checks before falling back to greedy selection.
EXACT_BUDGET = 20_000


def reclaim_plan(
    engine: PlacementEngine,
    request: Request,
    *,
    tenant: str,
    priority: int | None = None,
) -> PlacementResult:
    """A placement for ``tenant``'s guaranteed ``request``, listing bookings it would preempt.

    Only borrowed bookings of other tenants (and, when ``priority`` is given, of no higher
    priority) are candidates. Returns a :class:`Placement` whose ``preempts`` names them (empty
    when the request fits as is), or the usual explained :class:`Rejection`. Books nothing.
    """
    start, end = engine.window_of(request)
    direct = engine.search(request, start, end, explain=False)
    if isinstance(direct, Placement):
        return direct
    shape = engine.shape(request)
    if shape is None:
        return engine.search(request, start, end)
    elig = engine.eligibility(request, shape.gpus_per_node)
    if shape.nodes > elig.nodes:
        return engine.search(request, start, end)
    state = engine.state
    victims = {
        b.id: b
        for b in state.bookings.values()
        if b.owner.borrowed
        and b.owner.tenant != tenant
        and (priority is None or b.owner.priority <= priority)
        and b.start < end
        and b.end > start
    }
    if not victims:
        return engine.search(request, start, end)

    # Per eligible node: the bookings holding it in the window, when all of them are victims.
    base_counts = [0] * len(engine.topology.groups)
    reclaimable: list[tuple[int, int, frozenset[str], list[tuple[int, str]]]] = []
    for node in engine.topology.nodes:
        if not elig.admits(node.id, node.leaf_group):
            continue
        if state.node_state[node.id] is not NodeState.AVAILABLE:
            continue
        holders = [(m, bid) for s, e, m, bid in state.entries[node.id] if s < end and e > start]
        if not holders:
            base_counts[node.leaf_group] += 1
            continue
        if shape.whole and not all(bid in victims for _, bid in holders):
            continue
        blockers = frozenset(bid for _, bid in holders if bid in victims)
        if blockers:
            reclaimable.append((node.id, node.leaf_group, blockers, holders))

    level = engine.max_level(request)
    full = state.full_mask

    def feasible(chosen: frozenset[str]) -> bool:
        if shape.whole:
            counts = list(base_counts)
            for _node, group, blockers, _holders in reclaimable:
                if blockers <= chosen:
                    counts[group] += 1
            return choose_groups(counts, engine.topology.pods, shape.nodes, level) is not None
        for node, _group, _blockers, holders in reclaimable:
            mask = full[node]
            for m, bid in holders:
                if bid not in chosen:
                    mask &= ~m
            if mask.bit_count() >= shape.gpus_per_node:
                return True
        return False

    relevant = sorted(
        {bid for _, _, blockers, _ in reclaimable for bid in blockers},
        key=lambda bid: (victims[bid].owner.priority, victims[bid].gpus, bid),
    )
    if not relevant or not feasible(frozenset(relevant)):
        return engine.search(request, start, end)
    chosen = _smallest_set(relevant, feasible) or _greedy_set(relevant, victims, feasible)
    placement = engine.search(request, start, end, explain=False, ignore=chosen)
    if not isinstance(placement, Placement):  # pragma: no cover - counts and search agree
        return engine.search(request, start, end)
    used = _overlapping(state.bookings.values(), placement, chosen)
    return dataclasses.replace(placement, preempts=tuple(sorted(used)))


def _smallest_set(relevant: list[str], feasible: object) -> frozenset[str] | None:
    checks = 0
    for size in range(1, len(relevant) + 1):
        for combo in combinations(relevant, size):
            checks += 1
            if checks > EXACT_BUDGET:
                return None
            candidate = frozenset(combo)
            if feasible(candidate):  # type: ignore[operator]
                return candidate
    return None


def _greedy_set(
    relevant: list[str], victims: dict[str, Booking], feasible: object
) -> frozenset[str]:
    # Largest holders first reach feasibility quickly; pruning then drops any that turned out
    # unnecessary, most important first, so the result is at least irreducible.
    chosen: list[str] = []
    for bid in sorted(relevant, key=lambda b: -victims[b].gpus):
        chosen.append(bid)
        if feasible(frozenset(chosen)):  # type: ignore[operator]
            break
    for bid in sorted(chosen, key=lambda b: -victims[b].owner.priority):
        trial = frozenset(chosen) - {bid}
        if trial and feasible(trial):  # type: ignore[operator]
            chosen.remove(bid)
    return frozenset(chosen)


def _overlapping(
    bookings: Iterable[Booking], placement: Placement, chosen: frozenset[str]
) -> set[str]:
    allocation = dict(placement.allocations())
    used: set[str] = set()
    for booking in bookings:
        if booking.id not in chosen:
            continue
        if booking.start >= placement.end or booking.end <= placement.start:
            continue
        if any(allocation.get(node, 0) & mask for node, mask in booking.allocations):
            used.add(booking.id)
    return used
