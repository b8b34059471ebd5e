"""GPU-hours, borrowed hours, cost, preemptions and guaranteed-quota utilisation (chargeback).

Plain typed Python, no Django: ``scheduling.services.usage`` loads the rows, this module sums them.

Which time counts: a reservation's GPUs are held for its tenant over ``[held_from, held_until)``:

* ``held_from`` is the reservation's ``start`` (the moment its allocation rows begin; a queued
  request's ``start`` is set when a queue pass places it);
* ``held_until`` is the earliest of its ``end``, its ``ended_at`` (released early, preempted,
  expired, failed) and now: nothing is charged for a future that has not happened.

That interval is clipped to the report's window ``[from, to)`` and, for ``group_by=day``, cut at
every UTC midnight. GPU-hours are ``gpus × hours``; borrowed GPU-hours are the GPU-hours of
reservations granted beyond the guarantee (``borrowed``).

Which statuses count: those that held GPUs (``COUNTED``): placed, provisioning, ready, ending,
released, preempted. Never requested, queued, rejected or cancelled: a cancelled reservation was
withdrawn before it was ready, so its tenant never had the GPUs (its allocation rows are gone).

Preemptions are counted on the reservation's own row, once, in the bucket (and day) of its
``ended_at`` when that falls in the window.

Guaranteed-quota utilisation, per tenant and pool: non-borrowed GPU-hours over
``guaranteed_gpus × window hours`` (None without a guarantee). It is only meaningful for groups
made of exactly one tenant and pool pair's quota, so tenant and pool groups carry the sum of their
quotas' guarantees as denominator, and reservation, day and site groups carry none.

A reservation's site is its fabric's site (``Reservation.fabric``: for one spanning sites, the
fabric holding most of its nodes); a fabric without a site is a site of its own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Protocol

HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)

#: Statuses whose reservations held GPUs at some point (see the module docstring).
COUNTED = frozenset({"placed", "provisioning", "ready", "ending", "released", "preempted"})
PREEMPTED = "preempted"


class GroupBy(StrEnum):
    TENANT = "tenant"
    POOL = "pool"
    RESERVATION = "reservation"
    DAY = "day"
    SITE = "site"


class Prices(Protocol):
    """What the report needs of ``scheduling.services.pricing.PriceBook``."""

    @property
    def currency(self) -> str: ...

    def price(self, pool_id: int, priority_class: str) -> Decimal: ...


@dataclass(frozen=True)
class Held:
    """One reservation as the report sees it."""

    id: int
    tenant_id: int
    pool_id: int
    priority_class: str
    gpus: int
    borrowed: bool
    status: str
    start: dt.datetime
    end: dt.datetime
    ended_at: dt.datetime | None = None
    #: the group key of the site its fabric is at (the service fills it for ``group_by=site``)
    site: str = ""

    def held_until(self, now: dt.datetime) -> dt.datetime:
        return min(t for t in (self.end, self.ended_at, now) if t is not None)


@dataclass
class Bucket:
    """The sums of one group."""

    key: int | dt.date | str
    gpu_hours: Decimal = Decimal(0)
    borrowed_gpu_hours: Decimal = Decimal(0)
    cost: Decimal = Decimal(0)
    preemptions: int = 0
    guaranteed_gpu_hours: Decimal | None = None  # denominator of guaranteed_utilisation
    reservations: set[int] = field(default_factory=set)

    @property
    def guaranteed_utilisation(self) -> float | None:
        if not self.guaranteed_gpu_hours:
            return None
        return float((self.gpu_hours - self.borrowed_gpu_hours) / self.guaranteed_gpu_hours)


@dataclass(frozen=True)
class Report:
    buckets: list[Bucket]
    total: Bucket
    currency: str


def _hours(span: dt.timedelta) -> Decimal:
    # Exact to the microsecond: no float drift in sums of many pieces.
    micros = (span.days * 86_400 + span.seconds) * 1_000_000 + span.microseconds
    return Decimal(micros) / Decimal(3_600_000_000)


def _midnight(moment: dt.datetime) -> dt.datetime:
    utc = moment.astimezone(dt.UTC)
    return utc.replace(hour=0, minute=0, second=0, microsecond=0)


def day_pieces(start: dt.datetime, end: dt.datetime) -> list[tuple[dt.date, dt.timedelta]]:
    """``[start, end)`` cut at UTC midnights: (day, length within that day)."""
    pieces: list[tuple[dt.date, dt.timedelta]] = []
    cursor = start
    while cursor < end:
        cut = min(_midnight(cursor) + DAY, end)
        pieces.append((cursor.astimezone(dt.UTC).date(), cut - cursor))
        cursor = cut
    return pieces


def held_pieces(
    row: Held, window_from: dt.datetime, window_to: dt.datetime, now: dt.datetime, *, by_day: bool
) -> list[tuple[dt.date | None, dt.timedelta]]:
    """The parts of ``row``'s held interval inside ``[window_from, window_to)`` (per UTC day)."""
    if row.status not in COUNTED:
        return []
    start = max(row.start, window_from)
    end = min(row.held_until(now), window_to)
    if end <= start:
        return []
    if by_day:
        return list(day_pieces(start, end))
    return [(None, end - start)]


def _key(group_by: GroupBy, row: Held, day: dt.date | None) -> int | dt.date | str:
    if group_by is GroupBy.SITE:
        return row.site
    if group_by is GroupBy.TENANT:
        return row.tenant_id
    if group_by is GroupBy.POOL:
        return row.pool_id
    if group_by is GroupBy.RESERVATION:
        return row.id
    assert day is not None  # day pieces always carry their day
    return day


def _add(bucket: Bucket, row: Held, gpu_hours: Decimal, price: Decimal) -> None:
    bucket.gpu_hours += gpu_hours
    if row.borrowed:
        bucket.borrowed_gpu_hours += gpu_hours
    bucket.cost += gpu_hours * price
    bucket.reservations.add(row.id)


def summarise(
    rows: Iterable[Held],
    *,
    window_from: dt.datetime,
    window_to: dt.datetime,
    now: dt.datetime,
    group_by: GroupBy,
    prices: Prices,
    guarantees: Mapping[tuple[int, int], int] | None = None,
) -> Report:
    """Sum ``rows`` over ``[window_from, window_to)`` per ``group_by``.

    ``guarantees`` maps (tenant id, pool id) to guaranteed GPUs. Costs are summed unrounded and
    rounded to cents once per bucket, so a bucket's cost does not depend on how it was split.
    """
    by_day = group_by is GroupBy.DAY
    buckets: dict[int | dt.date | str, Bucket] = {}
    total = Bucket(key=0)
    for row in rows:
        price = prices.price(row.pool_id, row.priority_class)
        for day, span in held_pieces(row, window_from, window_to, now, by_day=by_day):
            key = _key(group_by, row, day)
            gpu_hours = _hours(span) * row.gpus
            _add(buckets.setdefault(key, Bucket(key=key)), row, gpu_hours, price)
            _add(total, row, gpu_hours, price)
        if row.status == PREEMPTED and row.ended_at is not None and window_from <= row.ended_at < window_to:
            key = _key(group_by, row, row.ended_at.astimezone(dt.UTC).date())
            buckets.setdefault(key, Bucket(key=key)).preemptions += 1
            total.preemptions += 1
    _guarantee(buckets, total, group_by, guarantees or {}, _hours(window_to - window_from))
    for bucket in [*buckets.values(), total]:
        bucket.cost = round_cents(bucket.cost)
    ordered = sorted(buckets.values(), key=lambda b: (str(type(b.key)), b.key))
    return Report(buckets=ordered, total=total, currency=prices.currency)


def _guarantee(
    buckets: dict[int | dt.date | str, Bucket],
    total: Bucket,
    group_by: GroupBy,
    guarantees: Mapping[tuple[int, int], int],
    window_hours: Decimal,
) -> None:
    if group_by in (GroupBy.TENANT, GroupBy.POOL):
        index = 0 if group_by is GroupBy.TENANT else 1
        for pair, gpus in guarantees.items():
            if not gpus:
                continue
            # A guarantee left unused is a group too: 0 % of it used is what chargeback must show.
            bucket = buckets.setdefault(pair[index], Bucket(key=pair[index]))
            bucket.guaranteed_gpu_hours = (bucket.guaranteed_gpu_hours or Decimal(0)) + gpus * window_hours
    if any(guarantees.values()):
        total.guaranteed_gpu_hours = sum(guarantees.values()) * window_hours


def round_cents(amount: Decimal) -> Decimal:
    return amount.quantize(Decimal("0.01"), rounding="ROUND_HALF_UP")


def round_hours(amount: Decimal) -> Decimal:
    """GPU-hours as shown and exported: three decimals (3.6 GPU-seconds)."""
    return amount.quantize(Decimal("0.001"), rounding="ROUND_HALF_UP")
