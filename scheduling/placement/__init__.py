"""Topology-aware gang placement for GPU pools (plain Python: no Django, no ORM).

Build a :class:`PoolTopology` (or use :func:`rail_optimized` / :func:`fat_tree`), wrap it in a
:class:`PlacementEngine`, load existing bookings with :meth:`PoolState.book`, then
``preview``/``place`` :class:`Request` objects. See :mod:`.engine` for the cost model.
"""

from .engine import PlacementEngine
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
    "rail_optimized",
    "reclaim_plan",
]
