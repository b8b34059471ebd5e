"""Topology-aware gang placement for GPU pools (plain Python: no Django, no ORM).

Build a :class:`PoolTopology` (or use :func:`rail_optimized` / :func:`fat_tree`), wrap it in a
:class:`PlacementEngine`, load existing bookings with :meth:`PoolState.book`, then
``preview``/``place`` :class:`Request` objects. See :mod:`.engine` for the cost model,
:mod:`.types` and :mod:`.protocol` for the constraint protocol, :mod:`.constraints` and
:mod:`.guarantees` for today's constraints, :mod:`.registry` for their public parameters and
:mod:`.reclaim` for preemption order.
"""

from .constraints import GpuModel, InPool, MaxSwitchHops, PoweredInTime, PoweredOn, RailAligned, SameLeaf
from .engine import PlacementEngine
from .guarantees import GuardView, ShapedGuarantees, guard_view
from .protocol import EngineView, GangGuard
from .reclaim import reclaim_plan
from .registry import ConstraintError, ConstraintType, Param
from .request import Request
from .state import Booking, BookingConflict, PoolState
from .topology import LeafGroup, NodeState, PoolTopology, TopoNode, fat_tree, rail_optimized
from .types import (
    Constraint,
    NodeFilter,
    Owner,
    Placement,
    PlacementResult,
    Policy,
    Rejection,
    RejectReason,
    Shortfall,
    SpreadLimit,
    format_window,
)

__all__ = [
    "Booking",
    "BookingConflict",
    "Constraint",
    "ConstraintError",
    "ConstraintType",
    "EngineView",
    "GangGuard",
    "GpuModel",
    "GuardView",
    "InPool",
    "LeafGroup",
    "MaxSwitchHops",
    "NodeFilter",
    "NodeState",
    "Owner",
    "Param",
    "Placement",
    "PlacementEngine",
    "PlacementResult",
    "Policy",
    "PoolState",
    "PoolTopology",
    "PoweredInTime",
    "PoweredOn",
    "RailAligned",
    "RejectReason",
    "Rejection",
    "Request",
    "SameLeaf",
    "ShapedGuarantees",
    "Shortfall",
    "SpreadLimit",
    "TopoNode",
    "fat_tree",
    "format_window",
    "guard_view",
    "rail_optimized",
    "reclaim_plan",
]
