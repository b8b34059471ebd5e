"""Today's placement constraints as implementations of the constraint protocol (:mod:`.types`).

Node filters: :class:`GpuModel`, :class:`InPool`, :class:`RailAligned`, :class:`PoweredInTime`
(and :class:`PoweredOn` as a preference, built per decision by :mod:`.powerfit`). Spread limits:
:class:`SameLeaf`, :class:`MaxSwitchHops`. :data:`DEFAULT_PREFERENCES` are node filters the
engine tries first for whole-node gangs (rail alignment), accepting the result when it spans no
more leaf groups than the unconstrained choice. The public parameters that build these objects
(``gpu_model``, ``same_leaf``, …) are declared in :mod:`.registry`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .selection import LEVEL_FABRIC, LEVEL_GROUP, LEVEL_POD
from .topology import HOPS_CROSS_POD, HOPS_SAME_POD, PoolTopology, TopoNode
from .types import NodeFilter, RejectReason, Shortfall, SpreadLimit


@dataclass(frozen=True, slots=True)
class GpuModel(NodeFilter):
    """Only nodes whose GPUs are ``model``."""

    model: str

    def admits(self, node: TopoNode, topology: PoolTopology) -> bool:
        return node.gpu_model == self.model

    def describe(self) -> str:
        return f"gpu_model={self.model}"


@dataclass(frozen=True, slots=True)
class InPool(NodeFilter):
    """Only nodes of the named pool (topologies that span several pools)."""

    pool: str

    def admits(self, node: TopoNode, topology: PoolTopology) -> bool:
        return node.pool == self.pool

    def describe(self) -> str:
        return f"pool={self.pool}"


@dataclass(frozen=True, slots=True)
class RailAligned(NodeFilter):
    """Only nodes whose HCA ``i`` sits on their group's rail-``i`` leaf."""

    def admits(self, node: TopoNode, topology: PoolTopology) -> bool:
        return node.id in topology.rail_aligned_nodes

    def describe(self) -> str:
        return "rail-aligned"


@dataclass(frozen=True, slots=True)
class PoweredInTime(NodeFilter):
    """Only nodes that are on, or can boot before the window starts (:mod:`.powerfit` decides which
    are ``excluded``: failed ones, and off ones whose boot time plus margin does not fit before the
    start). Its identity is the excluded set, so eligibility stays cached while power states hold."""

    excluded: frozenset[int]

    def admits(self, node: TopoNode, topology: PoolTopology) -> bool:
        return node.id not in self.excluded

    def describe(self) -> str:
        return f"powered on or booting in time ({len(self.excluded)} nodes excluded)"


@dataclass(frozen=True, slots=True)
class PoweredOn(NodeFilter):
    """Only nodes that are on now: a preference (tried first, taken first), never a request filter."""

    not_on: frozenset[int]

    def admits(self, node: TopoNode, topology: PoolTopology) -> bool:
        return node.id not in self.not_on

    def describe(self) -> str:
        return "powered on"


def one_group_shortfall(nodes: int, counts: Sequence[int], largest_group: int) -> Shortfall:
    """Why a gang held to one leaf group did not fit: too large for any group, or no group free
    enough in the window."""
    if largest_group < nodes:
        return Shortfall(
            RejectReason.TOO_LARGE,
            f"{nodes} nodes under one leaf requested; the largest leaf group has only {largest_group} eligible nodes",
            {"largest_group_size": largest_group},
            final=True,
        )
    largest = max(counts, default=0)
    return Shortfall(
        RejectReason.SAME_LEAF, f"{nodes} nodes under one leaf requested; the largest free leaf group has {largest}"
    )


@dataclass(frozen=True, slots=True)
class SameLeaf(SpreadLimit):
    """The whole gang inside one leaf group."""

    def max_level(self) -> int:
        return LEVEL_GROUP

    def shortfall(
        self, nodes: int, counts: Sequence[int], largest_group: int, topology: PoolTopology
    ) -> Shortfall | None:
        return one_group_shortfall(nodes, counts, largest_group)


@dataclass(frozen=True, slots=True)
class MaxSwitchHops(SpreadLimit):
    """At most ``hops`` inter-switch hops for rail-aligned traffic (0 = one leaf group, 2 = one
    pod, 4 = anywhere)."""

    hops: int

    def max_level(self) -> int:
        if self.hops >= HOPS_CROSS_POD:
            return LEVEL_FABRIC
        return LEVEL_POD if self.hops >= HOPS_SAME_POD else LEVEL_GROUP

    def shortfall(
        self, nodes: int, counts: Sequence[int], largest_group: int, topology: PoolTopology
    ) -> Shortfall | None:
        level = self.max_level()
        if level == LEVEL_GROUP:
            return one_group_shortfall(nodes, counts, largest_group)
        if level == LEVEL_POD and len(topology.pods) > 1:
            pod_free = max(sum(counts[g] for g in pod) for pod in topology.pods)
            return Shortfall(
                RejectReason.MAX_HOPS,
                f"{nodes} nodes within {self.hops} switch hops (one pod) requested; the largest free pod has {pod_free}",
                {"largest_free_pod": pod_free},
            )
        return None


#: Node filters the topology policy prefers for whole-node gangs (see the module docstring).
DEFAULT_PREFERENCES: tuple[NodeFilter, ...] = (RailAligned(),)


def builtin_constraints(
    *, gpu_model: str | None, pool: str | None, rail_aligned: bool, same_leaf: bool, max_switch_hops: int | None
) -> tuple[NodeFilter | SpreadLimit, ...]:
    """The built-in constraint objects for :class:`~.request.Request`'s shorthand fields, in
    the order a rejection names them."""
    out: list[NodeFilter | SpreadLimit] = []
    if gpu_model is not None:
        out.append(GpuModel(gpu_model))
    if pool is not None:
        out.append(InPool(pool))
    if rail_aligned:
        out.append(RailAligned())
    if same_leaf:
        out.append(SameLeaf())
    if max_switch_hops is not None:
        out.append(MaxSwitchHops(max_switch_hops))
    return tuple(out)
