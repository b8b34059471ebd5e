"""Value types of the placement engine: owners, placements, rejections, the constraint protocol.

Times are float seconds on one axis chosen by the caller (Unix epoch in the console, simulated
seconds in the replay). Windows are half-open ``[start, end)``; ``end = math.inf`` means
"until released".
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from .topology import PoolTopology, TopoNode


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
class Placement:
    """Where a request lands (or would land, for a preview).

    ``gpu_indices[k]`` are the GPUs used on ``node_ids[k]``. ``spines`` are the spines the job's
    traffic may traverse: none inside one leaf group, else every spine its leaves uplink to.
    ``score`` is in (0, 1], 1 meaning one leaf group, rail-aligned, filling the group's free nodes.
    ``sharp`` names the switches of its SHARP aggregation tree (:mod:`.sharp`), leaves to root.
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
    #: The switches of the job's SHARP aggregation tree (one tree each), when SHARP was asked for.
    sharp: tuple[str, ...] = ()

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

    reason: RejectReason | str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        # Lets callers write ``if result:`` for "placed" whatever the result type.
        return False


PlacementResult = Placement | Rejection


@dataclass(frozen=True, slots=True)
class Shape:
    """A request resolved against the pool: ``nodes`` × ``gpus_per_node``; ``whole`` nodes or not."""

    nodes: int
    gpus_per_node: int
    whole: bool


@dataclass(frozen=True, slots=True)
class Eligibility:
    """Nodes a request's node filters admit, per leaf group (``None``: every node of the group)."""

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


# ---------------------------------------------------------------- the constraint protocol
#
# In the manner of the Kubernetes scheduler framework: a request carries constraint objects and
# the engine loops over them by kind, knowing none by name. A constraint is a frozen (hashable)
# dataclass, so the engine can cache what it computes per combination of constraints.


class NodeFilter(ABC):
    """Which nodes a gang may use. Evaluated once per topology and filter combination (cached),
    never per node in the engine's "now" loop."""

    __slots__ = ()

    @abstractmethod
    def admits(self, node: TopoNode, topology: PoolTopology) -> bool:
        """Whether ``node`` may hold part of the gang."""

    @abstractmethod
    def describe(self) -> str:
        """The filter as a rejection quotes it (``gpu_model=H100``)."""


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why a spread limit left a gang unplaced: ``reason`` and ``message`` head, the figures
    behind it, and whether it is ``final`` (no later window can help, so none is searched)."""

    reason: RejectReason | str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    final: bool = False


class SpreadLimit(ABC):
    """How far up the tree a gang may spread: one leaf group, one pod, or the fabric (the levels
    of :mod:`.selection`). The tightest limit of a request decides, and explains a rejection."""

    __slots__ = ()

    @abstractmethod
    def max_level(self) -> int:
        """The highest level (``LEVEL_GROUP``/``LEVEL_POD``/``LEVEL_FABRIC``) the gang may use."""

    @abstractmethod
    def shortfall(
        self, nodes: int, counts: Sequence[int], largest_group: int, topology: PoolTopology
    ) -> Shortfall | None:
        """Explain why ``nodes`` whole nodes found no room at :meth:`max_level`, given the free
        nodes per leaf group (``counts``) and the largest group's eligible nodes; ``None`` when
        this limit was not what bound the gang."""


Constraint = NodeFilter | SpreadLimit


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
