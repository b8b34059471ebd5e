"""Rejections that explain themselves, with the figures behind the sentence.

Example: "16 nodes under one leaf requested; the largest free leaf group has 12; earliest window
with 16 is 14:00–18:00". Every number in the message is also in ``Rejection.details`` so the API
and the browser can show it without parsing prose.
"""

from __future__ import annotations

import math
from typing import Any

from .protocol import EngineView
from .request import Request
from .selection import LEVEL_FABRIC
from .topology import NodeState
from .types import Placement, Rejection, RejectReason, Shape, Window, format_window

#: How far ahead an explanation looks for the earliest window (30 days).
EXPLAIN_HORIZON_S = 30 * 86400.0


def _filters(request: Request) -> str:
    return ", ".join(f.describe() for f in request.node_filters) or "no filter"


def explain_rejection(
    engine: EngineView,
    request: Request,
    shape: Shape | None,
    start: float,
    end: float,
    window: Window | None,
    *,
    explain: bool,
) -> Rejection:
    """Build the rejection for ``request`` in ``[start, end)``; ``explain`` adds the next window.

    Without ``explain`` (the simulator's hot loop) the message is short and nothing is searched.
    """
    details: dict[str, Any] = {"window_start": start, "window_end": end}
    if shape is None:
        return Rejection(
            RejectReason.NO_ELIGIBLE_NODES,
            f"no node in the pool matches the request ({_filters(request)})",
            details,
        )
    elig = engine.eligibility(request, shape.gpus_per_node)
    n = shape.nodes
    gpus = n * shape.gpus_per_node
    details.update(
        requested_nodes=n,
        requested_gpus=gpus,
        gpus_per_node=shape.gpus_per_node,
        eligible_nodes=elig.nodes,
        eligible_gpus=elig.gpus,
    )
    if elig.nodes == 0:
        return Rejection(
            RejectReason.NO_ELIGIBLE_NODES,
            f"no node with {shape.gpus_per_node} GPUs matches the request ({_filters(request)})",
            details,
        )
    if n > elig.nodes:
        return Rejection(
            RejectReason.TOO_LARGE,
            f"{n} nodes ({gpus} GPUs) requested; the pool has only {elig.nodes} eligible nodes ({elig.gpus} GPUs)",
            details,
        )
    if not shape.whole:
        reason: RejectReason | str = RejectReason.NO_CAPACITY
        best = most_free_gpus_on_a_node(engine, request, shape, start, end)
        details["most_free_gpus_on_a_node"] = best
        head = f"{shape.gpus_per_node} GPUs on one node requested; the most free GPUs on one node is {best}"
        what = f"{shape.gpus_per_node} GPUs"
    else:
        assert window is not None
        largest = max(window.counts, default=0)
        free = sum(window.counts)
        details.update(free_nodes=free, largest_free_group=largest)
        what = str(n)
        reason = RejectReason.NO_CAPACITY
        head = (
            f"{n} nodes ({gpus} GPUs) requested; {free} nodes are free in the window "
            f"(largest free leaf group: {largest})"
        )
        # The tightest spread limit bound the gang, so it explains (the first of equals).
        binding = min(request.spread_limits, key=lambda c: c.max_level(), default=None)
        if binding is not None and binding.max_level() < LEVEL_FABRIC:
            short = binding.shortfall(n, window.counts, elig.largest_group, engine.topology)
            if short is not None:
                details.update(short.details)
                if short.final:
                    return Rejection(short.reason, short.message, details)
                reason, head = short.reason, short.message
    if explain:
        head += earliest_clause(engine, request, start, end, what, details)
    return Rejection(reason, head, details)


def earliest_clause(
    engine: EngineView,
    request: Request,
    start: float,
    end: float,
    what: str,
    details: dict[str, Any],
) -> str:
    """The clause naming the earliest window that fits (same owner, so the same guard rules);
    records ``earliest_start``/``earliest_end`` in ``details``."""
    duration = end - start
    later = engine.earliest_window(
        request,
        after=start,
        horizon=start + EXPLAIN_HORIZON_S,
        duration=duration if not math.isinf(duration) else math.inf,
    )
    if isinstance(later, Placement):
        details.update(earliest_start=later.start, earliest_end=later.end)
        return f"; earliest window with {what} is {format_window(later.start, later.end)}"
    details.update(earliest_start=None, earliest_end=None)
    return f"; no window with {what} in the next {EXPLAIN_HORIZON_S / 86400:g} days"


def most_free_gpus_on_a_node(
    engine: EngineView,
    request: Request,
    shape: Shape,
    start: float,
    end: float,
    excluded: frozenset[int] = frozenset(),
) -> int:
    """The most GPUs free over ``[start, end)`` on one eligible node outside ``excluded`` groups."""
    state = engine.state
    elig = engine.eligibility(request, shape.gpus_per_node)
    best = 0
    for node in engine.topology.nodes:
        if not elig.admits(node.id, node.leaf_group) or node.leaf_group in excluded:
            continue
        if state.node_state[node.id] is not NodeState.AVAILABLE:
            continue
        best = max(best, state.free_mask(node.id, start, end).bit_count())
    return best
