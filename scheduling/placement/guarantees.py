"""Topology-shaped guarantees: every tenant's "N whole leaf groups" stays placeable.

A quota may shape a tenant's guarantee as ``N`` whole leaf groups (in the spirit of HiveD's cells,
at the leaf-group level). Borrowed bookings never threaten it: :mod:`.reclaim` frees them for the
owner. Non-borrowed bookings of other tenants do, by fragmenting the pool, so every non-borrowed
placement goes through this guard.

The model. Each leaf group is, by the non-borrowed bookings holding any of its nodes from now on
(every booking of the state, whatever its window):

* **universal**: none; any shaped tenant can take it whole (after reclaiming borrowed capacity);
* **dedicated to S**: only bookings of shaped tenant ``S``; it counts toward ``S``'s groups;
* **dead**: anything else (a booking of a tenant without a shaped guarantee, or of two tenants).

``deficit_S = max(0, g_S - dedicated_S)`` is what ``S`` still needs whole. The guarantees are
placeable iff ``slack = universal - sum(deficit_S) >= 0``: each universal group serves one tenant.
A non-borrowed placement of tenant ``T`` turns the groups it touches universal → dead (or, ``T``
shaped, universal → dedicated to ``T``: free while ``T`` has a deficit, one slack otherwise) and
dedicated to ``S != T`` → dead (one slack while ``dedicated_S <= g_S``). It is allowed iff the
slack afterwards is still >= 0, or, where the pool was over-committed already (a guarantee set
while its groups were in use), not lower than before.

Why "from now on" rather than the request's window: a window-by-window check lets tenant ``T`` book
group A for [5, 10) and group B for [0, 5), each check seeing one universal group left, and then
no group is whole for [0, 10). Classifying by every booking that has not ended keeps ``N`` whole
groups for any window from now, of any length. It is also exact for every later instant: as
bookings end, groups only move dead → dedicated/universal or dedicated → universal, none of which
lowers the slack. Extending a booking never changes a class (its groups are counted already), and
the check costs O(leaf groups): the state keeps, per group, how many non-borrowed bookings each
tenant has. Down or draining nodes are ignored: the guard is about bookings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .state import PoolState

#: Group classes; a class >= 0 is "dedicated to the shaped tenant of that index".
UNIVERSAL = -1
DEAD = -2


class GuardView:
    """The pool's leaf groups classified for one requester (see the module docstring).

    ``needs[s]`` is shaped tenant ``s``'s guarantee in groups; ``requester`` is the requesting
    tenant's index among the shaped tenants, or -1; ``classes[g]`` is group ``g``'s class.
    """

    __slots__ = ("_cache", "classes", "dedicated", "needs", "requester", "slack", "universal")

    def __init__(self, needs: tuple[int, ...], requester: int, classes: list[int]) -> None:
        self.needs = needs
        self.requester = requester
        self.classes = classes
        self.universal = sum(1 for c in classes if c == UNIVERSAL)
        dedicated = [0] * len(needs)
        for cls in classes:
            if cls >= 0:
                dedicated[cls] += 1
        self.dedicated = tuple(dedicated)
        self.slack = self.universal - sum(n - d for n, d in zip(needs, dedicated, strict=True) if n > d)
        self._cache: dict[tuple[int, ...], tuple[bool, bool]] = {}

    def evaluate(self, groups: Iterable[int]) -> tuple[bool, bool]:
        """``(allowed, costs)`` of a non-borrowed placement on ``groups``: whether every shaped
        guarantee stays placeable, and whether it lowers the slack."""
        key = tuple(sorted(set(groups)))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        me = self.requester
        univ = 0
        kills = [0] * len(self.needs)
        for group in key:
            cls = self.classes[group]
            if cls == UNIVERSAL:
                univ += 1
            elif cls >= 0 and cls != me:
                kills[cls] += 1
        after = self.universal - univ
        for s, need in enumerate(self.needs):
            held = self.dedicated[s] + univ if s == me else self.dedicated[s] - kills[s]
            if need > held:
                after -= need - held
        result = (after >= min(0, self.slack), after < self.slack)
        self._cache[key] = result
        return result

    def allows(self, groups: Iterable[int]) -> bool:
        """Whether a non-borrowed placement on ``groups`` keeps every shaped guarantee placeable."""
        return self.evaluate(groups)[0]

    def costly_groups(self) -> frozenset[int]:
        """Groups that, taken alone, lower the slack by one (any more would cost as many)."""
        me, needs, dedicated = self.requester, self.needs, self.dedicated
        universal_costs = me < 0 or dedicated[me] >= needs[me]
        return frozenset(
            g
            for g, cls in enumerate(self.classes)
            if (cls == UNIVERSAL and universal_costs) or (cls >= 0 and cls != me and dedicated[cls] <= needs[cls])
        )

    def universal_groups(self) -> frozenset[int]:
        """Groups no non-borrowed booking holds."""
        return frozenset(g for g, cls in enumerate(self.classes) if cls == UNIVERSAL)

    def spare(self) -> int:
        """Universal groups no guarantee needs (0 when over-committed)."""
        return max(0, self.slack)

    def held_for_others(self) -> int:
        """Leaf groups reserved for the guarantees of tenants other than the requester."""
        return sum(n for s, n in enumerate(self.needs) if s != self.requester)


def guard_view(
    state: PoolState,
    guarantees: Mapping[str, int],
    tenant: str,
    ignore: frozenset[str] = frozenset(),
) -> GuardView:
    """Classify the pool's leaf groups for a non-borrowed request of ``tenant`` (``ignore``:
    bookings to pretend away)."""
    shaped = sorted(t for t, n in guarantees.items() if n > 0)
    code_of = {t: k for k, t in enumerate(shaped)}
    holders = state.group_holders
    if ignore:
        holders = list(holders)
        for bid in ignore:
            booking = state.bookings.get(bid)
            if booking is None or booking.owner.borrowed:
                continue
            for group in booking.groups:
                counts = dict(holders[group])
                left = counts[booking.owner.tenant] - 1
                if left:
                    counts[booking.owner.tenant] = left
                else:
                    del counts[booking.owner.tenant]
                holders[group] = counts
    classes: list[int] = []
    for counts in holders:
        if not counts:
            classes.append(UNIVERSAL)
        elif len(counts) == 1:
            classes.append(code_of.get(next(iter(counts)), DEAD))
        else:
            classes.append(DEAD)
    return GuardView(tuple(guarantees[t] for t in shaped), code_of.get(tenant, -1), classes)


__all__ = ["DEAD", "UNIVERSAL", "GuardView", "guard_view"]
