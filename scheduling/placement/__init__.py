"""Topology-aware gang placement for GPU pools (plain Python: no Django, no ORM).

Build a :class:`PoolTopology` (or use :func:`rail_optimized` / :func:`fat_tree`), wrap it in a
:class:`PlacementEngine`, load existing bookings with :meth:`PoolState.book`, then
``preview``/``place`` :class:`Request` objects. See :mod:`.engine` for the cost model,
:mod:`.guarantees` for topology-shaped guarantees and :mod:`.reclaim` for preemption order.
"""

from .engine import PlacementEngine
from .guarantees import GuardView, guard_view
from .reclaim import reclaim_plan
from .state import Booking, BookingConflict, PoolState
from .topology import LeafGroup, NodeState, PoolTopology, TopoNode, fat_tree, rail_optimized
from .types import (
    Owner,
    Placement,
    PlacementResult,
    Policy,
    Rejection,
    RejectReason,
    Request,
    format_window,
)

__all__ = [
    "Booking",
    "BookingConflict",
    "GuardView",
    "LeafGroup",
    "NodeState",
    "Owner",
    "Placement",
    "PlacementEngine",
    "PlacementResult",
    "Policy",
    "PoolState",
    "PoolTopology",
    "RejectReason",
    "Rejection",
    "Request",
    "TopoNode",
    "fat_tree",
    "format_window",
    "guard_view",
    "rail_optimized",
    "reclaim_plan",
]
