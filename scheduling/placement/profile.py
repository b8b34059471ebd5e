"""The free-from profile of a pool: the conservative backfill estimate of when a queued gang
starts, in O(gang size × log nodes) instead of an earliest-window search per request.

Each available node is free from the end of its last booking (gaps between bookings are
ignored, so an estimate is never earlier than the engine could place the gang, node filters
considered, spread limits not). A request of ``n`` nodes is estimated to start when its ``n``-th
eligible node frees; it then holds those nodes for its duration, so the requests behind it are
estimated around it.
"""

from __future__ import annotations

import bisect
import math

from .engine import PlacementEngine
from .request import Request
from .topology import NodeState
from .types import Placement


class FreeProfile:
    """Per available node, the time it is free from; sorted for the ``n``-th smallest."""

    def __init__(self, engine: PlacementEngine) -> None:
        state = engine.state
        now = state.now
        self.engine = engine
        self.free_from: dict[int, float] = {}
        for node, entries in enumerate(state.entries):
            if state.node_state[node] is NodeState.AVAILABLE:
                self.free_from[node] = max([now, *(e[1] for e in entries if e[1] > now)])
        self.order = sorted((t, n) for n, t in self.free_from.items())

    def _hold(self, node: int, until: float) -> None:
        old = self.free_from.get(node)
        if old is None or until <= old:
            return
        del self.order[bisect.bisect_left(self.order, (old, node))]
        bisect.insort(self.order, (until, node))
        self.free_from[node] = until

    def booked(self, placement: Placement) -> None:
        """A placement made (or reserved) by the pass: its nodes are busy until it ends."""
        for node in placement.node_ids:
            self._hold(node, placement.end)

    def estimate(self, request: Request, duration: float) -> float | None:
        """When ``request`` could start (``None``: never: not enough eligible nodes), holding its
        nodes from then for ``duration``."""
        engine = self.engine
        shape = engine.shape(request)
        if shape is None:
            return None
        elig = engine.eligibility(request, shape.gpus_per_node)
        n = shape.nodes
        order = self.order
        if elig.nodes == len(self.engine.topology.nodes):
            # Every node eligible: the first ``n`` free-from times, held as one block.
            if len(order) < n:
                return None
            start = max(order[n - 1][0], engine.now)
            taken = [node for _, node in order[:n]]
            del order[:n]
            until = start + duration
            for node in taken:
                self.free_from[node] = until
            at = bisect.bisect_left(order, (until, -1))
            order[at:at] = sorted((until, node) for node in taken)
            return start
        group_of = engine.state.node_group
        taken = []
        start = -math.inf
        for t, node in order:
            if elig.admits(node, group_of[node]):
                taken.append(node)
                start = t
                if len(taken) == n:
                    break
        else:
            return None
        for node in taken:
            self._hold(node, start + duration)
        return start
