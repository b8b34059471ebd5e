"""Rejections that explain themselves, with the figures behind the sentence.

Example: "16 nodes under one leaf requested; the largest free leaf group has 12; earliest window
with 16 is 14:00–18:00". Every number in the message is also in ``Rejection.details`` so the API
and the browser can show it without parsing prose.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .selection import LEVEL_GROUP, LEVEL_POD
from .topology import NodeState
from .types import Placement, Rejection, RejectReason, Request, format_window

if TYPE_CHECKING:
    from .engine import PlacementEngine, Shape, Window
    from .guarantees import GuardView

#: How far ahead an explanation looks for the earliest window (30 days).
EXPLAIN_HORIZON_S = 30 * 86400.0


def _filters(request: Request) -> str:
    parts = []
    if request.gpu_model:
        parts.append(f"gpu_model={request.gpu_model}")
    if request.pool:
        parts.append(f"pool={request.pool}")
    if request.rail_aligned:
        parts.append("rail-aligned")
    return ", ".join(parts) or "no filter"


def explain_rejection(
    engine: PlacementEngine,
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
    level = engine.max_level(request)
    if not shape.whole:
        reason = RejectReason.NO_CAPACITY
        best = _most_free_gpus_on_a_node(engine, request, shape, start, end)
        details["most_free_gpus_on_a_node"] = best
        head = f"{shape.gpus_per_node} GPUs on one node requested; the most free GPUs on one node is {best}"
        what = f"{shape.gpus_per_node} GPUs"
    else:
        assert window is not None
        largest = max(window.counts, default=0)
        free = sum(window.counts)
        details.update(free_nodes=free, largest_free_group=largest)
        what = str(n)
        if level == LEVEL_GROUP:
            if elig.largest_group < n:
                details["largest_group_size"] = elig.largest_group
                return Rejection(
                    RejectReason.TOO_LARGE,
                    f"{n} nodes under one leaf requested; the largest leaf group has only "
                    f"{elig.largest_group} eligible nodes",
                    details,
                )
            reason = RejectReason.SAME_LEAF
            head = f"{n} nodes under one leaf requested; the largest free leaf group has {largest}"
        elif level == LEVEL_POD and len(engine.topology.pods) > 1:
            pod_free = max(sum(window.counts[g] for g in pod) for pod in engine.topology.pods)
            details["largest_free_pod"] = pod_free
            reason = RejectReason.MAX_HOPS
            head = (
                f"{n} nodes within {request.max_switch_hops} switch hops (one pod) requested; "
                f"the largest free pod has {pod_free}"
            )
        else:
            reason = RejectReason.NO_CAPACITY
            head = (
                f"{n} nodes ({gpus} GPUs) requested; {free} nodes are free in the window "
                f"(largest free leaf group: {largest})"
            )
    if explain:
        head += _earliest(engine, request, start, end, what, details)
    return Rejection(reason, head, details)


def _earliest(
    engine: PlacementEngine,
    request: Request,
    start: float,
    end: float,
    what: str,
    details: dict[str, Any],
) -> str:
    # The clause naming the earliest window that fits (same owner, so the same guarantee rule).
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


def guarantee_rejection(
    engine: PlacementEngine,
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

    Names no tenant: tenants must not learn of each other. ``held_leaf_groups`` is the number of
    leaf groups the other tenants' shaped guarantees hold; the message then says what fits
    outside the costly groups (``excluded``).
    """
    shape = engine.shape(request)
    assert shape is not None  # the unrestricted search placed it
    elig = engine.eligibility(request, shape.gpus_per_node)
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
        window = engine.whole_node_window(elig, start, end, ignore, excluded)
        if engine.max_level(request) == LEVEL_GROUP:
            outside = max(window.counts, default=0)
            fit = f"{outside} nodes fit under one leaf outside them"
        else:
            outside = sum(window.counts)
            fit = f"{outside} nodes fit outside them"
        details["free_nodes_outside"] = outside
        head = f"{n} nodes ({gpus} GPUs) requested; {reason}; {fit}"
        what = str(n)
    else:
        best = _most_free_gpus_on_a_node(engine, request, shape, start, end, excluded)
        details["most_free_gpus_on_a_node_outside"] = best
        head = (
            f"{shape.gpus_per_node} GPUs on one node requested; {reason}; the most free GPUs "
            f"on one node outside them is {best}"
        )
        what = f"{shape.gpus_per_node} GPUs"
    if explain:
        head += _earliest(engine, request, start, end, what, details)
    return Rejection(RejectReason.GUARANTEE, head, details)


def _most_free_gpus_on_a_node(
    engine: PlacementEngine,
    request: Request,
    shape: Shape,
    start: float,
    end: float,
    excluded: frozenset[int] = frozenset(),
) -> int:
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
