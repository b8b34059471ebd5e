"""One queue pass: FIFO with backfill and patience, over a :class:`PlacementEngine` (plain Python).

The replay simulator (:mod:`scheduling.replay.simulator`) and the reservation queue of the
console (:mod:`scheduling.services.queue`) both run :func:`queue_pass`; only what they keep of its
decisions differs. A pass scans the queued jobs in order:

* a job that fits now (the cheap free-GPU count first, then the engine's search) is placed now
  and booked in the engine under its key;
* the first ``reservations`` jobs that do not fit get their earliest window
  (:meth:`PlacementEngine.earliest_window`, the same backfill the engine explains rejections
  with; under the topology policy a tighter one opening soon after, :mod:`.locality`) booked as
  a future booking, so later jobs only backfill around them and never delay them.
  The simulator keeps that booking (EASY backfill: one reservation); the console keeps it only
  for the pass and reports its start as the job's ``estimated_start``;
* with ``estimate``, the jobs after those get a conservative estimate from the pool's free-from
  profile (:mod:`.profile`), each held in the profile in turn, so the queue's estimates cost no
  engine search (an earliest-window search per job would take seconds on a large pool).

Within a pass capacity only shrinks (it books, never releases), so a search that failed for a
gang also fails for a larger or longer one with the same constraints: such jobs are not searched.

Patience (Slurm's ``--switches=N@max-wait``): until ``submitted + max_wait`` a multi-node job
waits for a *packed* placement, the tightest spread the pool can hold it in (one leaf group, else
one pod); after that it takes any valid placement, still chosen topology-aware. A ``gate``
(quota) may hold a job back and gives the owner it is booked under.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from .constraints import MaxSwitchHops, SameLeaf
from .engine import PlacementEngine
from .locality import tighter_window
from .profile import FreeProfile
from .request import Request
from .selection import LEVEL_GROUP, LEVEL_POD
from .topology import HOPS_SAME_POD
from .types import Owner, Placement, SpreadLimit


@dataclass(frozen=True, slots=True)
class QueuedJob:
    """A queued gang request: ``request`` (its window is ignored: ``duration`` from the time it
    starts), when it was submitted and how long it waits for a packed placement."""

    key: str
    request: Request
    duration: float
    submitted: float
    max_wait: float = 0.0
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class QueueDecision:
    """What the pass decided for one job: placed now, reserved for later (``placement.start`` in
    the future, ``estimated_start``) or still waiting (``placement`` is ``None``)."""

    job: QueuedJob
    position: int
    placement: Placement | None
    estimated_start: float | None
    packed: bool
    note: str
    held_by_gate: bool = False

    @property
    def placed_now(self) -> bool:
        return self.placement is not None and self.estimated_start is None


class Gate(Protocol):
    """Admission of a job at a window (the console's quota); ``None`` holds it back."""

    def admit(self, job: QueuedJob, start: float, end: float) -> Owner | None: ...

    def booked(self, job: QueuedJob, placement: Placement) -> None: ...


@dataclass
class PassMetrics:
    """Measurements a pass appends to (the simulator's decision times and fragmentation)."""

    decision_ms: list[float] = field(default_factory=list)
    fragmentation: list[float] = field(default_factory=list)


def packed_limit(engine: PlacementEngine, request: Request) -> SpreadLimit | None:
    """The tightest spread limit the pool could hold ``request`` under (one leaf group, else one
    pod), or ``None`` when the request is already that tight, is one node, or fits nowhere tighter."""
    shape = engine.shape(request)
    if shape is None or shape.nodes <= 1 or not shape.whole:
        return None
    elig = engine.eligibility(request, shape.gpus_per_node)
    current = engine.max_level(request)
    if current > LEVEL_GROUP and shape.nodes <= elig.largest_group:
        return SameLeaf()
    pods = engine.topology.pods
    if current > LEVEL_POD and len(pods) > 1:
        per_group = [
            len(g.nodes) if m is None else len(m) for g, m in zip(engine.topology.groups, elig.per_group, strict=True)
        ]
        if shape.nodes <= max(sum(per_group[g] for g in pod) for pod in pods):
            return MaxSwitchHops(HOPS_SAME_POD)
    return None


def _describe(limit: SpreadLimit) -> str:
    return "one leaf group" if isinstance(limit, SameLeaf) else "one pod"


def queue_pass(
    engine: PlacementEngine,
    jobs: Sequence[QueuedJob],
    *,
    reservations: int = 1,
    depth: int | None = None,
    gate: Gate | None = None,
    metrics: PassMetrics | None = None,
    estimate: bool = False,
) -> list[QueueDecision]:
    """Scan ``jobs`` in order at the engine's ``now``; book what is placed or reserved (see the
    module docstring). Jobs beyond ``depth`` are not examined (no decision returned)."""
    now = engine.now
    decisions: list[QueueDecision] = []
    reserved = 0
    profile = FreeProfile(engine) if estimate else None
    failed: dict[tuple[object, ...], list[tuple[int, float]]] = {}
    for position, job in enumerate(jobs[:depth] if depth is not None else jobs, start=1):
        end = now + job.duration
        owner = gate.admit(job, now, end) if gate is not None else job.request.owner
        if gate is not None and owner is None:
            decisions.append(QueueDecision(job, position, None, None, False, "over quota now", held_by_gate=True))
            continue
        # Shape, eligibility and the packed limit do not depend on the window or owner: the
        # request is rebuilt for its window only when it is searched.
        limit = packed_limit(engine, job.request) if job.max_wait > 0 else None
        deadline = job.submitted + job.max_wait
        patient = limit is not None and now < deadline
        key, size = _failure_key(engine, job.request, owner, limit if patient else None)
        hopeless = any(size >= n and job.duration >= d for n, d in failed.get(key, ()))
        wide: Request | None = None
        request: Request | None = None
        placed: Placement | None = None
        if not hopeless and job.gpus <= engine.state.free_gpus_now():
            wide, request = _windowed(job, now, end, owner, limit if patient else None)
            if metrics is not None:
                metrics.fragmentation.append(engine.fragmentation())
            began = time.perf_counter()
            outcome = engine.search(request, now, end, explain=False)
            if metrics is not None:
                metrics.decision_ms.append((time.perf_counter() - began) * 1000)
            if isinstance(outcome, Placement):
                placed = outcome
            else:
                failed.setdefault(key, []).append((size, job.duration))
        note = _note(limit, patient, job, now)
        if placed is not None:
            _book(engine, job, placed, owner, gate, profile)
            if patient and limit is not None:
                note = f"packed placement ({_describe(limit)}) found within max_wait of {job.max_wait / 60:.0f} min"
            decisions.append(QueueDecision(job, position, placed, None, patient, note))
            continue
        if reserved >= reservations:
            guess = profile.estimate(job.request, job.duration) if profile is not None else None
            decisions.append(QueueDecision(job, position, None, guess, patient, note))
            continue
        if wide is None or request is None:
            wide, request = _windowed(job, now, end, owner, limit if patient else None)
        began = time.perf_counter()
        future = _earliest(engine, request, wide, patient, deadline)
        if metrics is not None:
            metrics.decision_ms.append((time.perf_counter() - began) * 1000)
        if future is None:
            decisions.append(QueueDecision(job, position, None, None, patient, note))
            continue
        reserved += 1
        _book(engine, job, future, owner, gate, profile)
        start = future.start if future.start > now else None
        decisions.append(QueueDecision(job, position, future, start, patient and future.start < deadline, note))
    return decisions


def _earliest(
    engine: PlacementEngine, request: Request, wide: Request, patient: bool, deadline: float
) -> Placement | None:
    # The earliest window of the packed request; a patient job also takes a wide one from its
    # deadline on, whichever starts first.
    packed = engine.earliest_window(request, after=engine.now)
    if not patient:
        return tighter_window(engine, request, packed)
    if packed is not None and packed.start <= deadline:
        return packed
    later = engine.earliest_window(wide, after=deadline)
    if packed is None or (later is not None and later.start < packed.start):
        return later
    return packed


def _windowed(
    job: QueuedJob, now: float, end: float, owner: Owner | None, limit: SpreadLimit | None
) -> tuple[Request, Request]:
    # The job's request over [now, end) as ``owner``: as asked (wide) and as searched (packed
    # while patient).
    wide = replace(job.request, start=now, end=end, owner=owner)
    return wide, (replace(wide, constraints=(*wide.constraints, limit)) if limit is not None else wide)


def _failure_key(
    engine: PlacementEngine, request: Request, owner: Owner | None, limit: SpreadLimit | None
) -> tuple[tuple[object, ...], int]:
    # What a failed search depends on besides size and duration: constraints (with the packed
    # limit of a patient job), node size, and the owner when gang guards (which treat owners
    # differently) apply.
    shape = engine.shape(request)
    if shape is None:
        return ("none",), 0
    who = owner if engine.guards else None
    if shape.whole:
        return (request.node_filters, request.spread_limits, limit, True, shape.gpus_per_node, who), shape.nodes
    return (request.node_filters, request.spread_limits, limit, False, who), shape.gpus_per_node


def _book(
    engine: PlacementEngine,
    job: QueuedJob,
    placement: Placement,
    owner: Owner | None,
    gate: Gate | None,
    profile: FreeProfile | None,
) -> None:
    engine.book(job.key, placement, owner)
    if gate is not None:
        gate.booked(job, placement)
    if profile is not None:
        profile.booked(placement)


def _note(limit: SpreadLimit | None, patient: bool, job: QueuedJob, now: float) -> str:
    if job.max_wait <= 0 or math.isinf(job.submitted):
        return "no patience: any valid placement, chosen topology-aware"
    if limit is None:
        return "already as packed as the pool allows: any valid placement, chosen topology-aware"
    waited = max(0.0, now - job.submitted)
    if patient:
        return (
            f"waiting for a packed placement ({_describe(limit)}): {waited / 60:.0f} of "
            f"{job.max_wait / 60:.0f} min max_wait elapsed"
        )
    return (
        f"max_wait of {job.max_wait / 60:.0f} min elapsed without a packed placement "
        f"({_describe(limit)}): a wider one is accepted"
    )


def waiting_words(decision: QueueDecision, position: int) -> str:
    """Why a queued request waits, in words its tenant reads on its card, its page and in the
    API (``reason``): over quota, or no room until its estimated start (or none found yet), with
    its place in the queue and, while it is patient, what it waits for."""
    gpus = decision.job.gpus
    if decision.held_by_gate:
        return (
            f"over your quota in this pool now: the {gpus} GPUs wait until your other reservations "
            "here end (or an operator raises the quota)"
        )
    ahead = position - 1
    queue = f"{ahead} request{'' if ahead == 1 else 's'} ahead of it" if ahead else "first in the queue"
    if decision.estimated_start is not None:
        when = dt.datetime.fromtimestamp(decision.estimated_start, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        words = f"no room for {gpus} GPUs now: expected to start about {when} ({queue})"
    else:
        words = f"no room for {gpus} GPUs now, and no window found yet in the pool's bookings ({queue})"
    return f"{words}; {decision.note}" if decision.packed else words


__all__ = ["Gate", "PassMetrics", "QueueDecision", "QueuedJob", "packed_limit", "queue_pass", "waiting_words"]
