"""The placement engine: topology-aware (or first-fit) gang placement over a :class:`PoolState`.

One search serves every entry point: :meth:`PlacementEngine.preview` (reserves nothing),
:meth:`PlacementEngine.place` (preview then book), :meth:`PlacementEngine.earliest_window`
(backfill of future windows) and :mod:`.reclaim` (preemption of borrowed capacity).

Constraints are plugins (:mod:`.types`, :mod:`.protocol`); the engine knows none by name. A
request's node filters decide the eligible nodes (computed once per filter combination and
cached); its spread limits cap the tree level the gang may spread over (the tightest wins, and
explains a rejection); the engine's preferences (default: rail alignment) are node filters tried
first for whole-node gangs; the pool's gang guards (the topology-shaped guarantees of
:mod:`.guarantees`) wrap the search and may repeat it leaving leaf groups out, or reject.

Against the pool (issue 39): a job that fits now is placed now, topology-aware among what is
free, never held back for locality (the pool would idle); a job that must wait is given, under
the topology policy, the tightest window opening within a tenth of its run time (15 min at
most) after its earliest one (:mod:`.locality`). On a busy pool most multi-node jobs start
from such a window: this keeps them packed, and backfill fills the wait.

Cost model. A "now" request reads the per-group free counters the state keeps incrementally and
only inspects nodes that have a booking starting later, then the nodes of the groups it picks:
O(groups + future nodes + picked group sizes). A future window checks the interval lists of the
eligible nodes once: O(nodes + their bookings).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .constraints import DEFAULT_PREFERENCES
from .explain import explain_rejection
from .protocol import GangGuard
from .request import Request
from .selection import (
    LEVEL_FABRIC,
    LEVEL_GROUP,
    build_placement,
    choose_groups,
    first_fit_nodes,
    hole_first_node,
    lowest_bits,
    take_nodes,
    time_slack,
)
from .state import Booking, PoolState, first_gap
from .topology import NodeState, PoolTopology
from .types import Eligibility, NodeFilter, Owner, Placement, PlacementResult, Policy, Shape, Window


class PlacementEngine:
    """Places gang requests on a pool; all mutations go through the underlying :class:`PoolState`.

    ``policy`` selects how nodes are chosen: ``topology`` (best fit, fewest leaf groups, rail
    alignment) or ``first-fit`` (first free nodes in index order, the baseline for benchmarks).
    ``guards`` are the pool's gang guards (e.g. :class:`~.guarantees.ShapedGuarantees`);
    ``preferences`` the node filters the topology policy tries first (rail alignment by default).
    """

    def __init__(
        self,
        topology: PoolTopology,
        *,
        now: float = 0.0,
        policy: Policy | str = Policy.TOPOLOGY,
        state: PoolState | None = None,
        guards: Sequence[GangGuard] = (),
        preferences: Sequence[NodeFilter] = DEFAULT_PREFERENCES,
    ) -> None:
        self.topology = topology
        self.state = state if state is not None else PoolState(topology, now)
        self.policy = Policy(policy)
        self.guards = tuple(guards)
        self.preferences = tuple(preferences)
        # Nodes every preference admits: taken first inside a leaf group, and for shares.
        self._preferred = topology.derived(
            ("preferred", self.preferences),
            lambda: frozenset(n.id for n in topology.nodes if all(p.admits(n, topology) for p in self.preferences)),
        )
        # Free-node windows computed during one guarded search (its passes differ only in the
        # groups they leave out); ``None`` outside such a search.
        self._windows: dict[tuple[object, ...], Window] | None = None

    # ---------------------------------------------------------------- state passthroughs

    @property
    def now(self) -> float:
        """Current time of the pool state."""
        return self.state.now

    def advance(self, now: float) -> list[Booking]:
        """Move time forward; returns bookings that ended."""
        return self.state.advance(now)

    def book(self, booking_id: str, placement: Placement, owner: Owner | None = None) -> Booking:
        """Book a placement obtained from :meth:`preview` (raises ``BookingConflict`` if stale);
        the guards are told (:meth:`GangGuard.booked`)."""
        booking = self.state.book(booking_id, owner or Owner(), placement.allocations(), placement.start, placement.end)
        for guard in self.guards:
            guard.booked(booking_id, placement)
        return booking

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
        """Earliest placement of ``request``'s duration starting in ``[after, horizon)``: one
        search per candidate start (``after`` and booking ends, the only instants capacity grows),
        first fit wins; for whole-node gangs candidates before the time ``nodes`` eligible nodes
        (of one group, under ``same_leaf``) each have a long enough gap are skipped."""
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
                starts.append(first_gap(state.entries[node], after, length))
            per_group.append(starts)
        n = shape.nodes
        if self.max_level(request) == LEVEL_GROUP:
            bounds = [sorted(s)[n - 1] for s in per_group if len(s) >= n]
            return min(bounds) if bounds else None
        merged = sorted(t for s in per_group for t in s)
        return merged[n - 1] if len(merged) >= n else None

    def fragmentation(self) -> float:
        """How scattered the free capacity is (see :meth:`PoolState.fragmentation`)."""
        return self.state.fragmentation()

    # ---------------------------------------------------------------- the search

    def eligibility(self, request: Request, min_gpus: int = 1) -> Eligibility:
        """Node filters of ``request`` applied to the topology (computed once per topology and
        filter combination)."""
        return self._eligible(request.node_filters, min_gpus)

    def _eligible(self, filters: tuple[NodeFilter, ...], min_gpus: int) -> Eligibility:
        return self.topology.derived(("eligible", filters, min_gpus), lambda: self._compute_eligible(filters, min_gpus))

    def _compute_eligible(self, filters: tuple[NodeFilter, ...], min_gpus: int) -> Eligibility:
        topo = self.topology
        per_group: list[frozenset[int] | None] = []
        count = gpus = largest = node_gpus = 0
        for group in topo.groups:
            members = [
                n
                for n in group.nodes
                if topo.nodes[n].gpus >= min_gpus and all(f.admits(topo.nodes[n], topo) for f in filters)
            ]
            per_group.append(None if len(members) == len(group.nodes) else frozenset(members))
            count += len(members)
            gpus += sum(topo.nodes[n].gpus for n in members)
            largest = max(largest, len(members))
            node_gpus = max([node_gpus, *(topo.nodes[n].gpus for n in members)])
        return Eligibility(tuple(per_group), count, gpus, largest, node_gpus)

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
        """Highest tree level a request may spread over: the tightest of its spread limits."""
        return min((c.max_level() for c in request.spread_limits), default=LEVEL_FABRIC)

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

        Without an applicable gang guard this is the unrestricted search. Otherwise the guards
        wrap it, outermost first, each able to repeat the search leaving leaf groups out.
        """
        guards = [g for g in self.guards if g.applies(request)]
        if not guards:
            return self._search_raw(request, start, end, explain, ignore)
        saved, self._windows = self._windows, {}
        try:
            return self._guarded(guards, request, start, end, explain, ignore, frozenset())
        finally:
            self._windows = saved

    def _guarded(
        self,
        guards: list[GangGuard],
        request: Request,
        start: float,
        end: float,
        explain: bool,
        ignore: frozenset[str],
        exclude: frozenset[int],
    ) -> PlacementResult:
        if not guards:
            return self._search_raw(request, start, end, explain, ignore, exclude)
        inner = guards[1:]

        def raw(more: frozenset[int], explain_inner: bool) -> PlacementResult:
            return self._guarded(inner, request, start, end, explain_inner, ignore, exclude | more)

        return guards[0].search(self, request, start, end, raw, explain=explain, ignore=ignore)

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
        if shape.whole and self.policy is Policy.TOPOLOGY:
            extra = tuple(p for p in self.preferences if p not in request.node_filters)
            preferred = self._eligible((*request.node_filters, *extra), shape.gpus_per_node) if extra else elig
            if preferred.nodes < elig.nodes:
                # Some eligible nodes are not preferred: take an all-preferred gang when it
                # spans no more leaf groups than the unconstrained choice (a strict subset).
                first = self._search_whole(request, shape, preferred, start, end, False, ignore, exclude)
                if isinstance(first, Placement) and len(first.leaf_groups) == 1:
                    return first  # no choice spans fewer groups: skip the unconstrained search
                fallback = self._search_whole(request, shape, elig, start, end, explain, ignore, exclude)
                if isinstance(first, Placement) and (
                    not isinstance(fallback, Placement) or len(first.leaf_groups) <= len(fallback.leaf_groups)
                ):
                    return first
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
            nodes = first_fit_nodes(window, self.topology.pods, shape.nodes, level)
        else:
            chosen = choose_groups(window.counts, self.topology.pods, shape.nodes, level)
            nodes = None
            if chosen is not None and shape.nodes == 1 and start <= self.state.now:
                # One whole node now: a backfill hole anywhere before an open node (see
                # :func:`.selection.hole_first_node`).
                nodes = [hole_first_node(window, self._preferred, time_slack(self.state, start, end))]
            elif chosen is not None:
                groups, _ = chosen
                free = {g: window.free_nodes_of(g) for g in groups}
                nodes = take_nodes(groups, free, shape.nodes, self._preferred, time_slack(self.state, start, end))
        if nodes is None:
            return explain_rejection(self, request, shape, start, end, window, explain=explain)
        used_groups = {self.state.node_group[n] for n in nodes}
        free_in_groups = sum(window.counts[g] for g in used_groups)
        masks = [self.state.full_mask[n] for n in nodes]
        return build_placement(
            self.topology, self.policy, nodes, masks, start, end, fill=len(nodes) / max(1, free_in_groups)
        )

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
        # A share of one node. Preferred (rail-aligned) nodes first (a miswired node is the last
        # resort, and stays free for nobody's gang), then best fit: the node with the fewest free GPUs that
        # still fit, in the group with the fewest wholly free nodes, so whole nodes and groups
        # stay free for large gangs.
        state = self.state
        want = shape.gpus_per_node
        now_path = start <= state.now and not ignore
        available = NodeState.AVAILABLE
        first_fit = self.policy is Policy.FIRST_FIT
        preferred = self._preferred
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
                    key = (node not in preferred, free, group_free, node)
                if best is None or key < best:
                    best, best_mask = key, mask
            if first_fit and best is not None:
                break
        if best is None:
            return explain_rejection(self, request, shape, start, end, None, explain=explain)
        node = best[3]
        gpus = lowest_bits(best_mask, want)
        mask = sum(1 << i for i in gpus)
        return build_placement(
            self.topology, self.policy, [node], [mask], start, end, fill=want / best_mask.bit_count()
        )


__all__ = ["PlacementEngine"]
