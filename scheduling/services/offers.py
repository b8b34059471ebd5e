"""What the preview adds for a person deciding: the cost of a request, and, when it cannot be
placed, concrete alternatives that can ("112 GPUs now", "240 GPUs at 14:00 UTC", "queue it").

Every alternative is checked with :func:`.reservations.decide`, the very quota-and-placement path
``reserve`` runs, on the preview's snapshot; the search is bounded (a bisection over the sizes a
gang may take, a handful of candidate start times), so a refused preview stays cheap.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal
from typing import Any

from console.tenancy.models import Tenant
from scheduling.models import Pool, Quota, Reservation
from scheduling.placement.types import Constraint
from scheduling.services.decision import Decision, ReservationRequest, decide
from scheduling.services.pricing import price_book
from scheduling.services.snapshots import Snapshot

#: Rejection codes no alternative cures (no quota at all, or nothing in the pool can ever match).
HOPELESS = {"no_quota", "class_not_allowed", "no_eligible_nodes", "invalid"}
#: Candidate start times tried for the "later" offer beyond the engine's earliest window.
MAX_LATER_TRIES = 8


def gpu_hours(decision: Decision) -> Decimal:
    """GPUs × hours of the decided window, to two decimals."""
    hours = Decimal((decision.end - decision.start).total_seconds()) / Decimal(3600)
    return (decision.gpus * hours).quantize(Decimal("0.01"))


def quote(pool: Pool, request: ReservationRequest, decision: Decision) -> dict[str, Any]:
    """``gpu_hours``, ``cost`` (a decimal string, at the pool's price for the class) and ``currency``."""
    book = price_book([pool.pk])
    hours = gpu_hours(decision)
    return {
        "gpu_hours": str(hours),
        "cost": str(book.cost(pool.pk, request.priority_class, hours)),
        "currency": book.currency,
    }


def offers(
    snap: Snapshot,
    request: ReservationRequest,
    tenant: Tenant,
    pool: Pool,
    quota: Quota | None,
    refused: Decision,
    *,
    extra: tuple[Constraint, ...] = (),
) -> list[dict[str, Any]]:
    """Alternatives to a refused request, each placeable as offered: the largest size that fits
    now, the earliest start at which the full size fits, and queueing it. ``extra``: constraints
    the decision was made under (a pool at several sites: the site chosen, ``OnSites``).

    Offers are in the unit the tenant asked in: whole nodes for a request by ``nodes`` (each offer
    then names ``nodes`` too, so taking it asks for nodes again), GPUs otherwise (``nodes`` null).
    """
    if refused.placed or quota is None or refused.code in HOPELESS:
        return []
    duration = refused.end - refused.start
    full = Size(refused.gpus, request.nodes)
    found: list[dict[str, Any]] = []
    now = _largest_now(snap, request, tenant, pool, quota, full, duration, extra)
    if now is not None:
        found.append({"kind": "smaller_now", **now.fields(), "start": None, "label": f"{now.words()} now"})
    start = _earliest_full(snap, request, tenant, pool, quota, refused, extra)
    if start is not None:
        label = f"{full.words()} at {start.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"
        found.append({"kind": "later", **full.fields(), "start": start, "label": label})
    if refused.gpus <= quota.limit_gpus and refused.code != "too_large":
        found.append(
            {"kind": "queue", **full.fields(), "start": None, "label": f"Queue {full.words()}, as soon as possible"}
        )
    return found


@dataclasses.dataclass(frozen=True)
class Size:
    """An offered size: its GPUs, and its whole nodes when the request was by nodes."""

    gpus: int
    nodes: int | None = None

    def fields(self) -> dict[str, int | None]:
        return {"gpus": self.gpus, "nodes": self.nodes}

    def words(self) -> str:
        if self.nodes is None:
            return f"{self.gpus} GPUs"
        return f"{self.nodes} node{'' if self.nodes == 1 else 's'} ({self.gpus} GPUs)"


def _sized(
    request: ReservationRequest, size: Size, start: dt.datetime | None, duration: dt.timedelta
) -> ReservationRequest:
    """``request`` at ``size`` (by nodes when the size names nodes, else by GPUs)."""
    gpus = None if size.nodes is not None else size.gpus
    return dataclasses.replace(
        request, gpus=gpus, nodes=size.nodes, start=start, end=None, duration=duration, asap=False
    )


def _sizes(snap: Snapshot, full: Size) -> list[Size]:
    """Sizes a gang may take below ``full``: by GPUs, 1..a node's GPUs then whole nodes; by
    nodes, 1..``full.nodes - 1`` nodes (of the shape the refused request had)."""
    if full.nodes is not None:
        per = full.gpus // full.nodes or max((n.gpus for n in snap.engine.topology.nodes), default=1)
        return [Size(n * per, n) for n in range(1, full.nodes)]
    per = max((n.gpus for n in snap.engine.topology.nodes), default=1)
    small = list(range(1, min(per, full.gpus - 1) + 1))
    return [Size(g) for g in small + list(range(2 * per, full.gpus, per))]


def _largest_now(
    snap: Snapshot,
    request: ReservationRequest,
    tenant: Tenant,
    pool: Pool,
    quota: Quota,
    full: Size,
    duration: dt.timedelta,
    extra: tuple[Constraint, ...],
) -> Size | None:
    """The largest size below ``full`` that fits now (bisection: placeability shrinks with size)."""
    sizes = _sizes(snap, full)
    lo, hi, best = 0, len(sizes) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        decision = decide(snap, _sized(request, sizes[mid], None, duration), tenant, pool, quota, extra=extra)
        if decision.placed:
            best, lo = Size(decision.gpus, sizes[mid].nodes), mid + 1
        else:
            hi = mid - 1
    return best


def _earliest_full(
    snap: Snapshot,
    request: ReservationRequest,
    tenant: Tenant,
    pool: Pool,
    quota: Quota,
    refused: Decision,
    extra: tuple[Constraint, ...],
) -> dt.datetime | None:
    """The earliest start at which the full size fits: the engine's earliest window when it names
    one, else (quota) the ends of the tenant's own bookings in the pool, earliest first."""
    if refused.gpus > quota.limit_gpus:
        return None
    duration = refused.end - refused.start
    candidates: list[dt.datetime] = []
    details = getattr(refused.result, "details", {}) or {}
    earliest = details.get("earliest_start")
    if isinstance(earliest, int | float):
        candidates.append(dt.datetime.fromtimestamp(earliest, dt.UTC))
    ends = (
        Reservation.objects.live()
        .filter(tenant=tenant, pool=pool, end__gt=refused.start)
        .order_by("end")
        .values_list("end", flat=True)
    )
    candidates += [end for end in ends[:MAX_LATER_TRIES] if end > refused.start]
    # Whole minutes, rounded up: the form (and a person) write starts to the minute.
    for start in sorted({_ceil_minute(c) for c in candidates})[:MAX_LATER_TRIES]:
        sized = _sized(request, Size(refused.gpus, request.nodes), start, duration)
        if decide(snap, sized, tenant, pool, quota, extra=extra).placed:
            return start
    return None


def _ceil_minute(at: dt.datetime) -> dt.datetime:
    whole = at.replace(second=0, microsecond=0)
    return whole if whole == at else whole + dt.timedelta(minutes=1)
