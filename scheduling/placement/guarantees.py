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

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .explain import earliest_clause, most_free_gpus_on_a_node
from .protocol import EngineView, GangGuard, RawSearch
from .request import Request
from .selection import LEVEL_GROUP
from .state import PoolState
from .types import Placement, PlacementResult, Rejection, RejectReason

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


class ShapedGuarantees(GangGuard):
    """The guard keeping every tenant's "N whole leaf groups" placeable (``guarantees`` maps
    tenants to N). Applies to non-borrowed requests; borrowed ones are reclaimable instead."""

    def __init__(self, guarantees: Mapping[str, int]) -> None:
        self.guarantees: dict[str, int] = {t: n for t, n in guarantees.items() if n > 0}

    def applies(self, request: Request) -> bool:
        return bool(self.guarantees) and not (request.owner is not None and request.owner.borrowed)

    def view(self, host: EngineView, request: Request, ignore: frozenset[str] = frozenset()) -> GuardView:
        """The leaf groups classified for ``request``'s owner. The classification counts every
        non-borrowed booking that has not ended, whatever the request's window."""
        tenant = request.owner.tenant if request.owner is not None else ""
        return guard_view(host.state, self.guarantees, tenant, ignore)

    def search(
        self,
        host: EngineView,
        request: Request,
        start: float,
        end: float,
        raw: RawSearch,
        *,
        explain: bool,
        ignore: frozenset[str],
    ) -> PlacementResult:
        """An unrestricted placement that lowers no slack is taken as is; else, in order: the
        placement avoiding every costly group if it spans no more leaf groups than the first one
        (or the first one is not allowed), the first one if allowed, then the passes of
        :meth:`fallbacks`; failing all, a ``guarantee`` rejection. Every candidate is checked
        exactly (:meth:`GuardView.evaluate`), so the heuristics only decide how often a
        placement is found, never whether a guarantee is kept."""
        first = raw(frozenset(), explain)
        if not isinstance(first, Placement):
            return first
        view = self.view(host, request, ignore)
        allowed, costs = view.evaluate(first.leaf_groups)
        if not costs:
            return first
        costly = view.costly_groups()
        free: PlacementResult
        if costly:
            free = raw(costly, False)
            free_ok = isinstance(free, Placement) and view.allows(free.leaf_groups)
        else:  # only the combination costs (a shaped requester taking several universal groups)
            free, free_ok = first, allowed
        if free_ok and isinstance(free, Placement) and (not allowed or len(free.leaf_groups) <= len(first.leaf_groups)):
            return free
        if allowed:
            return first
        for exclude in self.fallbacks(host, request, view, costly):
            other = raw(exclude, False)
            if isinstance(other, Placement) and view.allows(other.leaf_groups):
                return other
        return self.rejection(host, request, start, end, view, costly, ignore, explain=explain)

    def fallbacks(
        self, host: EngineView, request: Request, view: GuardView, costly: frozenset[int]
    ) -> list[frozenset[int]]:
        """Group sets to leave out when neither the unrestricted placement nor the one avoiding
        every ``costly`` group is allowed. With slack to spare, a gang may spend it: all costly
        groups but the ``spare`` ones with the most free nodes now. A shaped requester may
        have taken more universal groups than it still needs: costly and universal groups."""
        out: list[frozenset[int]] = []
        shape = host.shape(request)
        if view.spare() and costly and shape is not None and shape.whole:
            counts = host.state.group_free_nodes
            keep = sorted(costly, key=lambda g: (-counts[g], g))[: view.spare()]
            out.append(costly - frozenset(keep))
        if view.requester >= 0:
            strict = costly | view.universal_groups()
            if strict != costly:
                out.append(strict)
        return out

    def passes(
        self, host: EngineView, request: Request, ignore: frozenset[str] = frozenset()
    ) -> tuple[list[frozenset[int]], Callable[[Iterable[int]], bool]]:
        view = self.view(host, request, ignore)
        costly = view.costly_groups()
        return [costly, *self.fallbacks(host, request, view, costly)], view.allows

    def rejection(
        self,
        host: EngineView,
        request: Request,
        start: float,
        end: float,
        view: GuardView,
        excluded: frozenset[int],
        ignore: frozenset[str],
        *,
        explain: bool,
    ) -> Rejection:
        """The request fits, but only by taking leaf groups other tenants' shaped guarantees need.

        Names no tenant: tenants must not learn of each other. ``held_leaf_groups`` is the number
        of leaf groups the other tenants' shaped guarantees hold; the message then says what fits
        outside the costly groups (``excluded``).
        """
        shape = host.shape(request)
        assert shape is not None  # the unrestricted search placed it
        elig = host.eligibility(request, shape.gpus_per_node)
        n = shape.nodes
        gpus = n * shape.gpus_per_node
        held = view.held_for_others()
        details: dict[str, Any] = {
            "window_start": start,
            "window_end": end,
            "requested_nodes": n,
            "requested_gpus": gpus,
            "gpus_per_node": shape.gpus_per_node,
            "held_leaf_groups": held,
        }
        reason = f"the free leaf groups are held for other tenants' guaranteed leaf groups ({held} held)"
        if shape.whole:
            window = host.whole_node_window(elig, start, end, ignore, excluded)
            if host.max_level(request) == LEVEL_GROUP:
                outside = max(window.counts, default=0)
                fit = f"{outside} nodes fit under one leaf outside them"
            else:
                outside = sum(window.counts)
                fit = f"{outside} nodes fit outside them"
            details["free_nodes_outside"] = outside
            head = f"{n} nodes ({gpus} GPUs) requested; {reason}; {fit}"
            what = str(n)
        else:
            best = most_free_gpus_on_a_node(host, request, shape, start, end, excluded)
            details["most_free_gpus_on_a_node_outside"] = best
            head = (
                f"{shape.gpus_per_node} GPUs on one node requested; {reason}; the most free GPUs "
                f"on one node outside them is {best}"
            )
            what = f"{shape.gpus_per_node} GPUs"
        if explain:
            head += earliest_clause(host, request, start, end, what, details)
        return Rejection(RejectReason.GUARANTEE, head, details)


__all__ = ["DEAD", "UNIVERSAL", "GuardView", "ShapedGuarantees", "guard_view"]
