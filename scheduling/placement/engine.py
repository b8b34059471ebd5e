"""The placement engine: topology-aware (or first-fit) gang placement over a :class:`PoolState`.

One search serves every entry point: :meth:`PlacementEngine.preview` (reserves nothing),
:meth:`PlacementEngine.place` (preview then book), :meth:`PlacementEngine.earliest_window`
(backfill of future windows) and :mod:`.reclaim` (preemption of borrowed capacity).

Topology-shaped guarantees (:mod:`.guarantees`): when the pool has any, a non-borrowed
placement is checked against them; if it would leave some tenant's "N whole leaf groups"
unplaceable, the search is repeated without the groups that cost (see :meth:`PlacementEngine.search`)
or the request is rejected with reason ``guarantee``.

Cost model. A "now" request reads the per-group free counters the state keeps incrementally and
only inspects nodes that have a booking starting later, then the nodes of the groups it picks:
O(groups + future nodes + picked group sizes). A future window checks the interval lists of the
eligible nodes once: O(nodes + their bookings).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from .explain import explain_rejection, guarantee_rejection
from .guarantees import GuardView, guard_view
from .selection import LEVEL_FABRIC, LEVEL_GROUP, LEVEL_POD, choose_groups, lowest_bits, take_nodes
from .state import Booking, PoolState
from .topology import HOPS_CROSS_POD, HOPS_SAME_GROUP, HOPS_SAME_POD, NodeState, PoolTopology
from .types import Owner, Placement, PlacementResult, Policy, Rejection, RejectReason, Request


@dataclass(frozen=True, slots=True)
class Shape:
    """A request resolved against the pool: ``nodes`` × ``gpus_per_node``; ``whole`` nodes or not."""

    nodes: int
    gpus_per_node: int
    whole: bool


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Nodes a request's filters admit, per leaf group (``None``: every node of the group)."""

    per_group: tuple[frozenset[int] | None, ...]
    nodes: int
    gpus: int
    largest_group: int
    node_gpus: int

    def admits(self, node: int, group: int) -> bool:
        """Whether ``node`` (in ``group``) passes the filters."""
        members = self.per_group[group]
        return members is None or node in members


@dataclass(slots=True)
class Window:
    """Free capacity of one window: free whole nodes per group, or free GPU masks per node."""

    counts: list[int]
    free_nodes_of: Callable[[int], list[int]]


class PlacementEngine:
    """Places gang requests on a pool; all mutations go through the underlying :class:`PoolState`.

    ``policy`` selects how nodes are chosen: ``topology`` (best fit, fewest leaf groups, rail
    alignment) or ``first-fit`` (first free nodes in index order, the baseline for benchmarks).
    ``guarantees`` maps tenants to their topology-shaped guarantee in whole leaf groups.
    """

    def __init__(
        self,
        topology: PoolTopology,
        *,
        now: float = 0.0,
        policy: Policy | str = Policy.TOPOLOGY,
        state: PoolState | None = None,
        guarantees: Mapping[str, int] | None = None,
    ) -> None:
        self.topology = topology
        self.state = state if state is not None else PoolState(topology, now)
        self.policy = Policy(policy)
        self.guarantees: dict[str, int] = {t: n for t, n in (guarantees or {}).items() if n > 0}
        # Free-node windows computed during one guarded search (its passes differ only in the
        # groups they leave out); ``None`` outside such a search.
        self._windows: dict[tuple[object, ...], Window] | None = None
        self._eligibility: dict[tuple[object, ...], Eligibility] = {}
        self._max_gpus = max((n.gpus for n in topology.nodes), default=0)
        self._group_capacity_gpus = [sum(topology.nodes[n].gpus for n in g.nodes) for g in topology.groups]

    # ---------------------------------------------------------------- state passthroughs

    @property
    def now(self) -> float:
        """Current time of the pool state."""
        return self.state.now

    def advance(self, now: float) -> list[Booking]:
        """Move time forward; returns bookings that ended."""
        return self.state.advance(now)

    def book(self, booking_id: str, placement: Placement, owner: Owner | None = None) -> Booking:
        """Book a placement obtained from :meth:`preview` (raises ``BookingConflict`` if stale)."""
        return self.state.book(booking_id, owner or Owner(), placement.allocations(), placement.start, placement.end)

    def release(self, booking_id: str) -> Booking:
        """Free a booking now."""
        return self.state.release(booking_id)

    def set_node_state(self, node: int, state: NodeState) -> None:
        """Change a node's operational state."""
        self.state.set_node_state(node, state)

    # ---------------------------------------------------------------- public API

    def preview(self, request: Request, *, explain: bool = True) -> PlacementResult:
        """Where ``request`` would land now or in its window; books nothing.

        With ``explain`` a rejection also searches the earliest window that would fit.
        """
        start, end = self.window_of(request)
        return self.search(request, start, end, explain=explain)

    def place(
        self,
        request: Request,
        booking_id: str,
        owner: Owner | None = None,
        *,
        explain: bool = True,
    ) -> PlacementResult:
        """Preview and book in one step (all or nothing); ``owner`` defaults to the request's."""
        result = self.preview(request, explain=explain)
        if isinstance(result, Placement):
            self.book(booking_id, result, owner or request.owner)
        return result

    def window_of(self, request: Request) -> tuple[float, float]:
        """The request's window clipped to ``now`` (the past cannot be booked)."""
        now = self.state.now
        start = now if request.start is None else max(request.start, now)
        end = request.end
        if not end > start:
            raise ValueError(f"the window ends at {end:g}, not after now ({now:g})")
        return start, end

    def earliest_window(
        self,
        request: Request,
        after: float | None = None,
        horizon: float = math.inf,
        *,
        duration: float | None = None,
    ) -> Placement | None:
        """Earliest placement of ``request``'s duration starting in ``[after, horizon)``.

        Capacity only grows when a booking ends, so the only candidate starts are ``after`` and
        booking ends: one search per candidate, in time order, first fit wins. For whole-node
        gangs a lower bound skips hopeless candidates: no start can precede the time by which
        ``nodes`` eligible nodes (of one group, under ``same_leaf``) have each had a long
        enough gap begin, so on a busy pool the loop starts near the answer.
        """
        start, end = self.window_of(request)
        length = duration if duration is not None else end - start
        if not length > 0:
            raise ValueError("the window needs a positive duration")
        first = start if after is None else max(after, self.state.now)
        if first >= horizon:
            return None
        bound = self._earliest_bound(request, first, length)
        if bound is None or bound >= horizon:
            return None
        candidates = [first, *(t for t in self.state.end_times(first) if t < horizon)]
        for t in candidates:
            if t < bound:
                continue
            result = self.search(request, t, t + length, explain=False)
            if isinstance(result, Placement):
                return result
        return None

    def _earliest_bound(self, request: Request, after: float, length: float) -> float | None:
        # Per eligible node, the start of its first free gap of ``length`` at or after ``after``;
        # the gang cannot start before the n-th smallest of them. ``None``: never fits.
        shape = self.shape(request)
        if shape is None:
            return None
        elig = self.eligibility(request, shape.gpus_per_node)
        if shape.nodes > elig.nodes:
            return None
        if not shape.whole:
            return after
        state = self.state
        per_group: list[list[float]] = []
        for group in self.topology.groups:
            starts = []
            for node in group.nodes:
                if not elig.admits(node, group.id):
                    continue
                if state.node_state[node] is not NodeState.AVAILABLE:
                    continue
                starts.append(_first_gap(state.entries[node], after, length))
            per_group.append(starts)
        n = shape.nodes
        if self.max_level(request) == LEVEL_GROUP:
            bounds = [sorted(s)[n - 1] for s in per_group if len(s) >= n]
            return min(bounds) if bounds else None
        merged = sorted(t for s in per_group for t in s)
        return merged[n - 1] if len(merged) >= n else None

    def fragmentation(self) -> float:
        """1 − largest free leaf-group block / the largest block the free capacity could form.

        A block is the GPUs of wholly free nodes in one leaf group; the ideal is
        ``min(total free GPUs, one group's capacity)``. 0 means free capacity is as
        concentrated as it can be; 1 means no whole node is free anywhere although GPUs are.
        """
        state = self.state
        total_free = state.free_gpus_now()
        if total_free == 0:
            return 0.0
        largest = 0
        for group in self.topology.groups:
            free_nodes = state.group_free_nodes[group.id]
            if free_nodes:
                per_node = self.topology.nodes[group.nodes[0]].gpus
                largest = max(largest, free_nodes * per_node)
        ideal = min(total_free, max(self._group_capacity_gpus))
        return max(0.0, 1.0 - largest / ideal)

    # ---------------------------------------------------------------- the search

    def eligibility(self, request: Request, min_gpus: int = 1) -> Eligibility:
        """Filters of ``request`` applied to the topology (cached per filter combination)."""
        key = (request.gpu_model, request.pool, request.rail_aligned, min_gpus)
        cached = self._eligibility.get(key)
        if cached is not None:
            return cached
        topo = self.topology
        aligned = topo.rail_aligned_nodes
        per_group: list[frozenset[int] | None] = []
        count = gpus = largest = node_gpus = 0
        for group in topo.groups:
            members = [
                n
                for n in group.nodes
                if (request.gpu_model is None or topo.nodes[n].gpu_model == request.gpu_model)
                and (request.pool is None or topo.nodes[n].pool == request.pool)
                and (not request.rail_aligned or n in aligned)
                and topo.nodes[n].gpus >= min_gpus
            ]
            per_group.append(None if len(members) == len(group.nodes) else frozenset(members))
            count += len(members)
            gpus += sum(topo.nodes[n].gpus for n in members)
            largest = max(largest, len(members))
            node_gpus = max([node_gpus, *(topo.nodes[n].gpus for n in members)])
        result = Eligibility(tuple(per_group), count, gpus, largest, node_gpus)
        self._eligibility[key] = result
        return result

    def shape(self, request: Request) -> Shape | None:
        """Resolve gpus/nodes/gpus_per_node against the pool's node size; ``None`` if no node."""
        node_gpus = self.eligibility(request).node_gpus
        if node_gpus == 0:
            return None
        if request.nodes is not None:
            return Shape(request.nodes, node_gpus, True)
        assert request.gpus is not None
        per = min(request.gpus_per_node or node_gpus, node_gpus)
        if request.gpus <= per:
            return Shape(1, request.gpus, request.gpus == node_gpus)
        # Above one node a gang takes whole nodes: sharing a node between gangs would put two
        # tenants' traffic on one HCA set and break partition isolation.
        return Shape(-(-request.gpus // per), node_gpus, True)

    @staticmethod
    def max_level(request: Request) -> int:
        """Highest tree level a request may spread over, from ``same_leaf``/``max_switch_hops``."""
        if request.same_leaf:
            return LEVEL_GROUP
        hops = request.max_switch_hops
        if hops is None or hops >= HOPS_CROSS_POD:
            return LEVEL_FABRIC
        return LEVEL_POD if hops >= HOPS_SAME_POD else LEVEL_GROUP

    def guarded(self, request: Request) -> bool:
        """Whether ``request`` must keep the shaped guarantees placeable (non-borrowed, and the
        pool has some)."""
        return bool(self.guarantees) and not (request.owner is not None and request.owner.borrowed)

    def guard_view(self, request: Request, ignore: frozenset[str] = frozenset()) -> GuardView | None:
        """The leaf groups classified for ``request``'s owner, or ``None`` when the request is not
        guarded. The classification counts every non-borrowed booking that has not ended,
        whatever the request's window (see :mod:`.guarantees`)."""
        if not self.guarded(request):
            return None
        tenant = request.owner.tenant if request.owner is not None else ""
        return guard_view(self.state, self.guarantees, tenant, ignore)

    def search(
        self,
        request: Request,
        start: float,
        end: float,
        *,
        explain: bool = True,
        ignore: frozenset[str] = frozenset(),
    ) -> PlacementResult:
        """Place ``request`` in ``[start, end)``; the engine's single decision procedure.

        Without shaped guarantees (or for a borrowed request) this is the unrestricted search.
        Otherwise an unrestricted placement that lowers no slack is taken as is; else, in
        order: the placement avoiding every costly group if it spans no more leaf groups than
        the first one (or the first one is not allowed), the first one if allowed, then the
        passes of :meth:`guard_fallbacks`; failing all, a ``guarantee`` rejection. Every
        candidate is checked exactly (:meth:`.GuardView.evaluate`), so the heuristics only
        decide how often a placement is found, never whether a guarantee is kept.
        """
        if not self.guarded(request):
            return self._search_raw(request, start, end, explain, ignore)
        saved, self._windows = self._windows, {}
        try:
            return self._guarded_search(request, start, end, explain, ignore)
        finally:
            self._windows = saved

    def _guarded_search(
        self, request: Request, start: float, end: float, explain: bool, ignore: frozenset[str]
    ) -> PlacementResult:
        first = self._search_raw(request, start, end, explain, ignore)
        if not isinstance(first, Placement):
            return first
        view = self.guard_view(request, ignore)
        assert view is not None
        allowed, costs = view.evaluate(first.leaf_groups)
        if not costs:
            return first
        costly = view.costly_groups()
        if costly:
            free = self._search_raw(request, start, end, False, ignore, costly)
            free_ok = isinstance(free, Placement) and view.allows(free.leaf_groups)
        else:  # only the combination costs (a shaped requester taking several universal groups)
            free, free_ok = first, allowed
        if free_ok and (not allowed or len(free.leaf_groups) <= len(first.leaf_groups)):
            return free
        if allowed:
            return first
        for exclude in self.guard_fallbacks(request, view, costly):
            other = self._search_raw(request, start, end, False, ignore, exclude)
            if isinstance(other, Placement) and view.allows(other.leaf_groups):
                return other
        return guarantee_rejection(self, request, start, end, view, costly, ignore, explain=explain)

    def guard_fallbacks(self, request: Request, view: GuardView, costly: frozenset[int]) -> list[frozenset[int]]:
        """Group sets to leave out when neither the unrestricted placement nor the one avoiding
        every ``costly`` group is allowed. With slack to spare, a gang may spend it: all costly
        groups but the ``spare`` ones with the most free nodes now. A shaped requester may
        have taken more universal groups than it still needs: costly and universal groups."""
        out: list[frozenset[int]] = []
        shape = self.shape(request)
        if view.spare() and costly and shape is not None and shape.whole:
            counts = self.state.group_free_nodes
            keep = sorted(costly, key=lambda g: (-counts[g], g))[: view.spare()]
            out.append(costly - frozenset(keep))
        if view.requester >= 0:
            strict = costly | view.universal_groups()
            if strict != costly:
                out.append(strict)
        return out

    def _search_raw(
        self,
        request: Request,
        start: float,
        end: float,
        explain: bool,
        ignore: frozenset[str],
        exclude: frozenset[int] = frozenset(),
    ) -> PlacementResult:
        # The unrestricted search, leaving the leaf groups in ``exclude`` out.
        shape = self.shape(request)
        if shape is None:
            return explain_rejection(self, request, None, start, end, None, explain=explain)
        elig = self.eligibility(request, shape.gpus_per_node)
        if elig.nodes == 0 or shape.nodes > elig.nodes:
            return explain_rejection(self, request, shape, start, end, None, explain=explain)
        if (
            shape.whole
            and self.policy is Policy.TOPOLOGY
            and not request.rail_aligned
            and len(self.topology.rail_aligned_nodes) < len(self.topology.nodes)
        ):
            # Some nodes are not rail-aligned: prefer an all-aligned gang when it spans no more
            # leaf groups than the unconstrained choice (the aligned pass is a strict subset).
            aligned = self._search_raw(replace(request, rail_aligned=True), start, end, False, ignore, exclude)
            fallback = self._search_whole(request, shape, elig, start, end, explain, ignore, exclude)
            if isinstance(aligned, Placement) and (
                not isinstance(fallback, Placement) or len(aligned.leaf_groups) <= len(fallback.leaf_groups)
            ):
                return aligned
            return fallback
        return self._search_whole(request, shape, elig, start, end, explain, ignore, exclude)

    def _search_whole(
        self,
        request: Request,
        shape: Shape,
        elig: Eligibility,
        start: float,
        end: float,
        explain: bool,
        ignore: frozenset[str],
        exclude: frozenset[int] = frozenset(),
    ) -> PlacementResult:
        if not shape.whole:
            return self._place_share(request, shape, elig, start, end, explain, ignore, exclude)
        window = self.whole_node_window(elig, start, end, ignore, exclude)
        level = self.max_level(request)
        if self.policy is Policy.FIRST_FIT:
            nodes = self._first_fit_nodes(window, shape.nodes, level)
        else:
            chosen = choose_groups(window.counts, self.topology.pods, shape.nodes, level)
            nodes = None
            if chosen is not None:
                groups, _ = chosen
                free = {g: window.free_nodes_of(g) for g in groups}
                nodes = take_nodes(groups, free, shape.nodes, self.topology.rail_aligned_nodes)
        if nodes is None:
            return explain_rejection(self, request, shape, start, end, window, explain=explain)
        used_groups = {self.state.node_group[n] for n in nodes}
        free_in_groups = sum(window.counts[g] for g in used_groups)
        masks = [self.state.full_mask[n] for n in nodes]
        return self._build(nodes, masks, start, end, fill=len(nodes) / max(1, free_in_groups))

    def whole_node_window(
        self,
        elig: Eligibility,
        start: float,
        end: float,
        ignore: frozenset[str] = frozenset(),
        exclude: frozenset[int] = frozenset(),
    ) -> Window:
        """Wholly free eligible nodes per leaf group over ``[start, end)`` (none in ``exclude``)."""
        memo = self._windows
        key = (id(elig), start, end, ignore)
        window = memo.get(key) if memo is not None else None
        if window is None:
            window = self._free_window(elig, start, end, ignore)
            if memo is not None:
                memo[key] = window
        if not exclude:
            return window
        counts = [0 if g in exclude else c for g, c in enumerate(window.counts)]
        inner = window.free_nodes_of
        return Window(counts, lambda g: [] if g in exclude else inner(g))

    def _free_window(self, elig: Eligibility, start: float, end: float, ignore: frozenset[str]) -> Window:
        state = self.state
        groups = self.topology.groups
        available = NodeState.AVAILABLE
        node_state = state.node_state
        if start <= state.now and not ignore:
            # "Now": start from the incremental counters, then correct only the groups whose
            # eligibility is partial and the nodes that have a booking starting later.
            counts = list(state.group_free_nodes)
            busy = state.busy_now
            for gid, members in enumerate(elig.per_group):
                if members is not None:
                    counts[gid] = sum(1 for n in members if busy[n] == 0 and node_state[n] is available)
            blocked: set[int] = set()
            for node in state.future:
                gid = state.node_group[node]
                if (
                    busy[node] == 0
                    and node_state[node] is available
                    and elig.admits(node, gid)
                    and state.free_mask(node, start, end) != state.full_mask[node]
                ):
                    counts[gid] -= 1
                    blocked.add(node)

            def free_now(gid: int) -> list[int]:
                members = elig.per_group[gid]
                return [
                    n
                    for n in groups[gid].nodes
                    if busy[n] == 0
                    and node_state[n] is available
                    and (members is None or n in members)
                    and n not in blocked
                ]

            return Window(counts, free_now)
        free_lists: list[list[int]] = []
        for group in groups:
            members = elig.per_group[group.id]
            free_lists.append(
                [
                    n
                    for n in group.nodes
                    if (members is None or n in members)
                    and node_state[n] is available
                    and (not state.entries[n] or state.free_mask(n, start, end, ignore) == state.full_mask[n])
                ]
            )
        return Window([len(f) for f in free_lists], free_lists.__getitem__)

    def _first_fit_nodes(self, window: Window, needed: int, level: int) -> list[int] | None:
        # The baseline knows nothing of leaves: first free nodes in index order. It still obeys
        # hard constraints, by taking the first group (or pod) in index order that holds them.
        if level == LEVEL_GROUP:
            for gid, count in enumerate(window.counts):
                if count >= needed:
                    return window.free_nodes_of(gid)[:needed]
            return None
        if level == LEVEL_POD and len(self.topology.pods) > 1:
            for pod in self.topology.pods:
                if sum(window.counts[g] for g in pod) >= needed:
                    nodes = [n for g in pod for n in window.free_nodes_of(g)]
                    return sorted(nodes)[:needed]
            return None
        if sum(window.counts) < needed:
            return None
        taken: list[int] = []
        for gid, count in enumerate(window.counts):
            if count:
                taken.extend(window.free_nodes_of(gid)[: needed - len(taken)])
                if len(taken) == needed:
                    break
        return taken

    def _place_share(
        self,
        request: Request,
        shape: Shape,
        elig: Eligibility,
        start: float,
        end: float,
        explain: bool,
        ignore: frozenset[str],
        exclude: frozenset[int] = frozenset(),
    ) -> PlacementResult:
        # A share of one node. Rail-aligned nodes first (a miswired node is the last resort, and
        # stays free for nobody's gang), then best fit: the node with the fewest free GPUs that
        # still fit, in the group with the fewest wholly free nodes, so whole nodes and groups
        # stay free for large gangs.
        state = self.state
        want = shape.gpus_per_node
        now_path = start <= state.now and not ignore
        available = NodeState.AVAILABLE
        first_fit = self.policy is Policy.FIRST_FIT
        aligned = self.topology.rail_aligned_nodes
        best: tuple[int, int, int, int] | None = None
        best_mask = 0
        for group in self.topology.groups:
            if now_path and state.group_free_gpus[group.id] < want:
                continue
            if group.id in exclude:
                continue
            members = elig.per_group[group.id]
            group_free = state.group_free_nodes[group.id]
            for node in group.nodes:
                if members is not None and node not in members:
                    continue
                if state.node_state[node] is not available:
                    continue
                if now_path and (state.full_mask[node] & ~state.busy_now[node]).bit_count() < want:
                    continue
                mask = state.free_mask(node, start, end, ignore)
                free = mask.bit_count()
                if free < want:
                    continue
                if first_fit:
                    key = (node, 0, 0, node)
                else:
                    key = (node not in aligned, free, group_free, node)
                if best is None or key < best:
                    best, best_mask = key, mask
            if first_fit and best is not None:
                break
        if best is None:
            return explain_rejection(self, request, shape, start, end, None, explain=explain)
        node = best[3]
        gpus = lowest_bits(best_mask, want)
        mask = sum(1 << i for i in gpus)
        return self._build([node], [mask], start, end, fill=want / best_mask.bit_count())

    def _build(self, nodes: list[int], masks: list[int], start: float, end: float, *, fill: float) -> Placement:
        topo = self.topology
        groups = sorted({topo.nodes[n].leaf_group for n in nodes})
        leaves: set[int] = set()
        gpu_indices: list[tuple[int, ...]] = []
        for node, mask in zip(nodes, masks, strict=True):
            info = topo.nodes[node]
            used = lowest_bits(mask, info.gpus)
            gpu_indices.append(used)
            hcas = len(info.rail_leaves)
            # GPU i is served by HCA i on a rail-optimised node; with fewer HCAs they are shared
            # in order (GPUs 0-3 on HCA 0, 4-7 on HCA 1 for two HCAs).
            leaves.update(info.rail_leaves[i * hcas // info.gpus] for i in used)
        if len(groups) == 1:
            hops, spines = HOPS_SAME_GROUP, ()
        else:
            pods = {topo.groups[g].pod for g in groups}
            hops = HOPS_SAME_POD if len(pods) == 1 else HOPS_CROSS_POD
            spines = tuple(sorted(topo.spines_for_leaves(leaves)))
        aligned = all(n in topo.rail_aligned_nodes for n in nodes)
        score = (1.0 / len(groups)) * (1.0 if aligned else 0.5) * min(1.0, fill)
        return Placement(
            node_ids=tuple(nodes),
            gpu_indices=tuple(gpu_indices),
            start=start,
            end=end,
            leaf_groups=tuple(groups),
            leaves=tuple(sorted(leaves)),
            spines=spines,
            rail_aligned=aligned,
            max_hops=hops,
            score=round(score, 4),
            policy=self.policy,
        )


def _first_gap(entries: list[tuple[float, float, int, str]], after: float, length: float) -> float:
    """Start of the first interval of ``length`` at or after ``after`` free of ``entries``."""
    t = after
    for s, e, _m, _bid in sorted(entries):
        if e <= t:
            continue
        if s >= t + length:
            break
        t = max(t, e)
    return t


__all__ = ["Eligibility", "PlacementEngine", "RejectReason", "Rejection", "Shape", "Window"]
