"""Value types of the placement engine: requests, owners, placements and rejections.

Times are float seconds on one axis chosen by the caller (Unix epoch in the console, simulated
seconds in the replay). Windows are half-open ``[start, end)``; ``end = math.inf`` means
"until released".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


class Policy(StrEnum):
    """How free nodes are chosen once a window's free capacity is known."""

    TOPOLOGY = "topology"
    FIRST_FIT = "first-fit"


@dataclass(frozen=True, slots=True)
class Owner:
    """Who holds a booking. ``borrowed`` capacity may be reclaimed for a guaranteed request.

    ``priority`` ranks bookings for reclaim: lower ranks give way first (the console maps its
    priority classes best-effort < training < inference to 0 < 1 < 2).
    """

    tenant: str = ""
    borrowed: bool = False
    priority: int = 0


@dataclass(frozen=True, slots=True)
class Request:
    """A gang request: all of it or nothing.

    Size is either ``gpus`` or ``nodes``. Above one node a request takes whole nodes
    (``ceil(gpus / gpus_per_node)`` of them, ``gpus_per_node`` defaulting to the node size); at or
    below one node it takes that many GPUs of a single node. ``start=None`` means "now".

    Constraints: ``gpu_model`` and ``pool`` filter nodes; ``same_leaf`` keeps the gang inside one
    leaf group; ``max_switch_hops`` bounds inter-switch hops of rail-aligned traffic (0 = one leaf
    group, 2 = one pod, 4 = anywhere); ``rail_aligned`` only uses nodes whose HCA ``i`` sits on
    their group's rail-``i`` leaf.

    ``owner`` says who asks and whether the request is borrowed: a non-borrowed request must
    leave every topology-shaped guarantee of the pool placeable (:mod:`.guarantees`); a borrowed
    one is reclaimable and is not restricted. ``None`` is an anonymous, non-borrowed requester.
    """

    gpus: int | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    start: float | None = None
    end: float = math.inf
    gpu_model: str | None = None
    pool: str | None = None
    same_leaf: bool = False
    max_switch_hops: int | None = None
    rail_aligned: bool = False
    owner: Owner | None = None

    def __post_init__(self) -> None:
        if (self.gpus is None) == (self.nodes is None):
            raise ValueError("give exactly one of gpus or nodes")
        if self.gpus is not None and self.gpus < 1:
            raise ValueError("gpus must be positive")
        if self.nodes is not None and self.nodes < 1:
            raise ValueError("nodes must be positive")
        if self.gpus_per_node is not None and self.gpus_per_node < 1:
            raise ValueError("gpus_per_node must be positive")
        if self.start is not None and not self.end > self.start:
            raise ValueError("the window must end after it starts")

    @property
    def duration(self) -> float | None:
        """Window length when the start is fixed, else ``None``."""
        return None if self.start is None else self.end - self.start


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a request lands (or would land, for a preview).

    ``gpu_indices[k]`` are the GPUs used on ``node_ids[k]``. ``spines`` are the spines the job's
    traffic may traverse: none inside one leaf group, else every spine its leaves uplink to.
    ``score`` is in (0, 1], 1 meaning one leaf group, rail-aligned, filling the group's free nodes.
    """

    node_ids: tuple[int, ...]
    gpu_indices: tuple[tuple[int, ...], ...]
    start: float
    end: float
    leaf_groups: tuple[int, ...]
    leaves: tuple[int, ...]
    spines: tuple[int, ...]
    rail_aligned: bool
    max_hops: int
    score: float
    policy: Policy = Policy.TOPOLOGY
    preempts: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        """GPUs held by the placement."""
        return sum(len(g) for g in self.gpu_indices)

    @property
    def gpus_per_node(self) -> int:
        """GPUs per node (placements are uniform: whole nodes, or one node's share)."""
        return len(self.gpu_indices[0]) if self.gpu_indices else 0

    def allocations(self) -> tuple[tuple[int, int], ...]:
        """``(node_id, gpu bit mask)`` pairs, the form :meth:`PoolState.book` takes."""
        return tuple(
            (node, sum(1 << i for i in gpus)) for node, gpus in zip(self.node_ids, self.gpu_indices, strict=True)
        )


class RejectReason(StrEnum):
    """Machine-readable cause of a rejection."""

    NO_ELIGIBLE_NODES = "no_eligible_nodes"
    TOO_LARGE = "too_large"
    NO_CAPACITY = "no_capacity"
    SAME_LEAF = "same_leaf"
    MAX_HOPS = "max_hops"
    GUARANTEE = "guarantee"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a request cannot be placed, with the figures a user needs to adjust it.

    ``details`` holds the numbers quoted in ``message`` (requested nodes, largest free leaf group,
    free nodes, earliest window) so the API can render them without parsing text.
    """

    reason: RejectReason
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        # Lets callers write ``if result:`` for "placed" whatever the result type.
        return False


PlacementResult = Placement | Rejection


def format_time(t: float) -> str:
    """Render a time for explanations: wall-clock UTC for epoch times, offsets for simulations."""
    if math.isinf(t):
        return "open end"
    if t >= 1e9:
        return datetime.fromtimestamp(t, UTC).strftime("%H:%M")
    return f"t={t:g}s"


def format_window(start: float, end: float) -> str:
    """``14:00–18:00`` (with the date when the window spans days)."""
    if start >= 1e9 and not math.isinf(end):
        a = datetime.fromtimestamp(start, UTC)
        b = datetime.fromtimestamp(end, UTC)
        if a.date() != b.date():
            return f"{a:%Y-%m-%d %H:%M}–{b:%Y-%m-%d %H:%M}"
    return f"{format_time(start)}–{format_time(end)}"
