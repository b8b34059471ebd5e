"""What constraint code may ask of the engine (:class:`EngineView`), and gang guards.

A :class:`GangGuard` is the third kind of constraint, beside the node filters and spread limits
of :mod:`.types`: a rule on the *set of leaf groups* a gang takes, checked on whole candidate
placements, that can steer the search by leaving groups out and explain its rejection. The
topology-shaped guarantees (:mod:`.guarantees`) are one. Guards belong to the pool (the engine
is built with them), not to a request; the engine applies those whose :meth:`GangGuard.applies`
holds, nested in the order given.

Explanations, guards and reclaim see the engine through :class:`EngineView`, so none of them
imports the engine module.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Protocol

from .request import Request
from .state import PoolState
from .topology import PoolTopology
from .types import Eligibility, Placement, PlacementResult, Policy, Shape, Window

#: The search a guard wraps: ``raw(exclude, explain)`` places the request leaving the leaf
#: groups in ``exclude`` out (and applies the guards nested inside this one).
RawSearch = Callable[[frozenset[int], bool], PlacementResult]


class EngineView(Protocol):
    """The read-only face of :class:`~.engine.PlacementEngine` that constraint code uses."""

    topology: PoolTopology
    state: PoolState
    policy: Policy

    def shape(self, request: Request) -> Shape | None:
        """The request resolved against the pool's node size."""
        ...

    def eligibility(self, request: Request, min_gpus: int = 1) -> Eligibility:
        """The request's node filters applied to the topology."""
        ...

    def max_level(self, request: Request) -> int:
        """The tightest level the request's spread limits allow."""
        ...

    def whole_node_window(
        self,
        elig: Eligibility,
        start: float,
        end: float,
        ignore: frozenset[str] = frozenset(),
        exclude: frozenset[int] = frozenset(),
    ) -> Window:
        """Wholly free eligible nodes per leaf group over ``[start, end)``."""
        ...

    def earliest_window(
        self, request: Request, after: float | None = None, horizon: float = ..., *, duration: float | None = None
    ) -> Placement | None:
        """Earliest placement of the request's duration starting in ``[after, horizon)``."""
        ...


class GangGuard(ABC):
    """A rule on the leaf groups a gang may take (see the module docstring)."""

    @abstractmethod
    def applies(self, request: Request) -> bool:
        """Whether ``request`` is subject to the guard (cheap: checked on every search)."""

    @abstractmethod
    def search(
        self,
        host: EngineView,
        request: Request,
        start: float,
        end: float,
        raw: RawSearch,
        *,
        explain: bool,
        ignore: frozenset[str],
    ) -> PlacementResult:
        """Place ``request`` in ``[start, end)`` through ``raw`` so that the guard holds, or
        reject it with the guard's explanation."""

    @abstractmethod
    def passes(
        self, host: EngineView, request: Request, ignore: frozenset[str] = frozenset()
    ) -> tuple[list[frozenset[int]], Callable[[Iterable[int]], bool]]:
        """For planners that search on counts (reclaim): the group sets the guard's search
        leaves out, in order, after the unrestricted pass; and the exact test of a group set."""

    def booked(self, booking_id: str, placement: Placement) -> None:
        """The engine booked ``placement`` as ``booking_id`` (a guard holding resources of its own,
        such as SHARP trees, records them here); nothing by default."""
        return None
