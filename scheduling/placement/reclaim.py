"""Reclaim of borrowed capacity: the borrowed bookings to preempt for a guaranteed request.

Tenants may borrow capacity beyond their guarantee while others leave it idle; when an owner then
claims guaranteed quota, the engine names the borrowed bookings that must give way.

Order. Bookings carry a priority rank (``Owner.priority``; the console ranks best-effort 0 <
training 1 < inference 2). Lower ranks strictly give way first: a rank is touched only when the
borrowed bookings of all lower ranks together cannot free the capacity. From the highest rank
needed down, each rank then gives the fewest bookings (fewest GPUs among equally few), with the
ranks above as already chosen and every booking below still available. So one large best-effort
booking goes before one small training booking, and two best-effort bookings before one training
booking. Within one rank this is the former rule: a minimal set, the smallest borrowers first
(exact search over small candidate sets, greedy plus pruning beyond a budget).

Feasibility of a candidate set is judged on counts (free nodes per leaf group, or free GPUs per
node for a share) with the same group choice as placement, so every subset test is cheap; the
final placement is then computed by the real search with those bookings ignored. Shaped
guarantees apply to the claim too (it is a non-borrowed placement): the guarantee view does not
depend on the victims (borrowed bookings never count), so it is built once and checks each
candidate's groups.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from itertools import combinations

from .engine import PlacementEngine
from .request import Request
from .selection import choose_groups
from .state import Booking
from .topology import NodeState
from .types import Owner, Placement, PlacementResult

#: Subset feasibility checks before falling back to greedy selection.
EXACT_BUDGET = 20_000


def reclaim_plan(
    engine: PlacementEngine,
    request: Request,
    *,
    tenant: str | None = None,
    priority: int | None = None,
) -> PlacementResult:
    """A placement for ``tenant``'s guaranteed ``request``, listing bookings it would preempt.

    ``tenant`` defaults to the request's owner; the request is searched as that tenant's,
    non-borrowed (so under the shaped-guarantee rule). Only borrowed bookings of other tenants
    (and, when ``priority`` is given, of no higher rank) are candidates, lower ranks first (see
    the module docstring). The console passes no ``priority``: capacity lent beyond a guarantee
    is returned to its owner whatever the borrower's class. Returns a :class:`Placement` whose
    ``preempts`` names them (empty when the request fits as is), or the usual explained
    :class:`Rejection`. Books nothing.
    """
    asked = request.owner or Owner()
    tenant = asked.tenant if tenant is None else tenant
    request = dataclasses.replace(request, owner=Owner(tenant, False, asked.priority))
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
    pods = engine.topology.pods
    # The applicable gang guards' passes (group sets they leave out) and exact checks.
    passes: list[frozenset[int]] = [frozenset()]
    checks: list[Callable[[Iterable[int]], bool]] = []
    for guard in engine.guards:
        if guard.applies(request):
            more, allows = guard.passes(engine, request)
            passes += more
            checks.append(allows)

    def allowed(groups: Iterable[int]) -> bool:
        return all(check(groups) for check in checks)

    def groups_fit(counts: list[int]) -> bool:
        # The engine's passes on counts: unrestricted, then leaving the guards' groups out.
        for exclude in passes:
            trimmed = [0 if g in exclude else c for g, c in enumerate(counts)]
            chosen = choose_groups(trimmed, pods, shape.nodes, level)
            if chosen is not None and allowed(chosen[0]):
                return True
        return False

    def feasible(chosen: frozenset[str]) -> bool:
        if shape.whole:
            counts = list(base_counts)
            for _node, group, blockers, _holders in reclaimable:
                if blockers <= chosen:
                    counts[group] += 1
            return groups_fit(counts)
        for node, group, _blockers, holders in reclaimable:
            mask = full[node]
            for m, bid in holders:
                if bid not in chosen:
                    mask &= ~m
            if mask.bit_count() >= shape.gpus_per_node and allowed((group,)):
                return True
        return False

    relevant = sorted(
        {bid for _, _, blockers, _ in reclaimable for bid in blockers},
        key=lambda bid: (victims[bid].owner.priority, victims[bid].gpus, bid),
    )
    if not relevant or not feasible(frozenset(relevant)):
        return engine.search(request, start, end)
    chosen = _tiered_set(relevant, victims, feasible)
    placement = engine.search(request, start, end, explain=False, ignore=chosen)
    if not isinstance(placement, Placement):  # pragma: no cover - counts and search agree
        return engine.search(request, start, end)
    used = _overlapping(state.bookings.values(), placement, chosen)
    return dataclasses.replace(placement, preempts=tuple(sorted(used)))


Feasible = Callable[[frozenset[str]], bool]


def _tiered_set(relevant: list[str], victims: dict[str, Booking], feasible: Feasible) -> frozenset[str]:
    # ``feasible(relevant)`` holds. The highest rank needed is the lowest whose bookings, with all
    # lower ones, suffice; then per rank, from it down, the fewest bookings given the ranks above
    # as chosen and everything below available (each step is feasible with all of its rank).
    def rank(bid: str) -> int:
        return victims[bid].owner.priority

    ranks = sorted({rank(b) for b in relevant})
    top = next(r for r in ranks if feasible(frozenset(b for b in relevant if rank(b) <= r)))
    chosen: frozenset[str] = frozenset()
    for r in reversed([x for x in ranks if x <= top]):
        tier = [b for b in relevant if rank(b) == r]
        below = frozenset(b for b in relevant if rank(b) < r)
        fixed = chosen

        def ok(subset: frozenset[str], fixed: frozenset[str] = fixed, below: frozenset[str] = below) -> bool:
            return feasible(fixed | subset | below)

        picked = _smallest_set(tier, victims, ok)
        chosen = fixed | (picked if picked is not None else _greedy_set(tier, victims, ok))
    return chosen


def _smallest_set(tier: list[str], victims: dict[str, Booking], ok: Feasible) -> frozenset[str] | None:
    # Fewest bookings, then fewest GPUs; ``None`` past the budget.
    if ok(frozenset()):
        return frozenset()
    checks = 0
    for size in range(1, len(tier) + 1):
        best: tuple[int, tuple[str, ...]] | None = None
        for combo in combinations(tier, size):
            gpus = sum(victims[b].gpus for b in combo)
            if best is not None and gpus >= best[0]:
                continue
            checks += 1
            if checks > EXACT_BUDGET:
                return None
            if ok(frozenset(combo)):
                best = (gpus, combo)
        if best is not None:
            return frozenset(best[1])
    return None


def _greedy_set(tier: list[str], victims: dict[str, Booking], ok: Feasible) -> frozenset[str]:
    # Largest holders first reach feasibility quickly; pruning then drops any that turned out
    # unnecessary, largest first, so the result is at least irreducible.
    chosen: list[str] = []
    for bid in sorted(tier, key=lambda b: -victims[b].gpus):
        chosen.append(bid)
        if ok(frozenset(chosen)):
            break
    for bid in sorted(chosen, key=lambda b: -victims[b].gpus):
        trial = frozenset(chosen) - {bid}
        if ok(trial):
            chosen.remove(bid)
    return frozenset(chosen)


def _overlapping(bookings: Iterable[Booking], placement: Placement, chosen: frozenset[str]) -> set[str]:
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
