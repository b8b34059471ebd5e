"""The gang request the engine places (see :class:`Request`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .constraints import builtin_constraints
from .types import Constraint, NodeFilter, Owner, SpreadLimit


@dataclass(frozen=True, slots=True)
class Request:
    """A gang request: all of it or nothing.

    Size is either ``gpus`` or ``nodes``. Above one node a request takes whole nodes
    (``ceil(gpus / gpus_per_node)`` of them, ``gpus_per_node`` defaulting to the node size); at or
    below one node it takes that many GPUs of a single node. ``start=None`` means "now".

    Constraints are objects of the protocol in :mod:`.types` (node filters and spread limits),
    given in ``constraints``. The fields ``gpu_model``, ``pool``, ``rail_aligned``, ``same_leaf``
    and ``max_switch_hops`` are shorthand for the built-in ones (:mod:`.constraints`): ``gpu_model``
    and ``pool`` filter nodes; ``same_leaf`` keeps the gang inside one leaf group;
    ``max_switch_hops`` bounds inter-switch hops of rail-aligned traffic (0 = one leaf group, 2 =
    one pod, 4 = anywhere); ``rail_aligned`` only uses nodes whose HCA ``i`` sits on their group's
    rail-``i`` leaf. ``node_filters`` and ``spread_limits`` are all of them, by kind.

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
    constraints: tuple[Constraint, ...] = ()
    node_filters: tuple[NodeFilter, ...] = field(init=False, repr=False, compare=False)
    spread_limits: tuple[SpreadLimit, ...] = field(init=False, repr=False, compare=False)

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
        shorthand = builtin_constraints(
            gpu_model=self.gpu_model,
            pool=self.pool,
            rail_aligned=self.rail_aligned,
            same_leaf=self.same_leaf,
            max_switch_hops=self.max_switch_hops,
        )
        everything = (*shorthand, *self.constraints)
        unknown = [c for c in everything if not isinstance(c, NodeFilter | SpreadLimit)]
        if unknown:
            raise TypeError(f"not a placement constraint: {unknown[0]!r}")
        # Resolved once here so the engine's loops read plain tuples (``dict.fromkeys`` drops
        # repeats while keeping the order a rejection names the filters in).
        filters = tuple(dict.fromkeys(c for c in everything if isinstance(c, NodeFilter)))
        limits = tuple(dict.fromkeys(c for c in everything if isinstance(c, SpreadLimit)))
        object.__setattr__(self, "node_filters", filters)
        object.__setattr__(self, "spread_limits", limits)

    @property
    def duration(self) -> float | None:
        """Window length when the start is fixed, else ``None``."""
        return None if self.start is None else self.end - self.start
