"""The usage arithmetic (scheduling.usage), without a database: every expectation below is worked
out by hand in its comment."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from scheduling.usage import GroupBy, Held, day_pieces, summarise

UTC = dt.UTC
T = dt.datetime


@dataclass
class Prices:
    overrides: dict[tuple[int, str], Decimal] = field(default_factory=dict)
    defaults: dict[str, Decimal] = field(
        default_factory=lambda: {"training": Decimal("2.00"), "inference": Decimal("1.50"), "best-effort": Decimal(0)}
    )
    currency: str = "EUR"

    def price(self, pool_id: int, priority_class: str) -> Decimal:
        return self.overrides.get((pool_id, priority_class), self.defaults[priority_class])


WINDOW_FROM = T(2026, 11, 1, tzinfo=UTC)
WINDOW_TO = T(2026, 11, 4, tzinfo=UTC)
NOW = T(2026, 11, 10, tzinfo=UTC)


def held(rid: int, start: T, end: T, **kwargs: object) -> Held:
    base: dict[str, object] = {
        "tenant_id": 1,
        "pool_id": 10,
        "priority_class": "training",
        "gpus": 8,
        "borrowed": False,
        "status": "released",
    }
    base.update(kwargs)
    return Held(id=rid, start=start, end=end, **base)  # type: ignore[arg-type]


def report(rows: list[Held], group_by: GroupBy = GroupBy.TENANT, prices: Prices | None = None, **kwargs: object):
    return summarise(
        rows,
        window_from=WINDOW_FROM,
        window_to=WINDOW_TO,
        now=kwargs.pop("now", NOW),  # type: ignore[arg-type]
        group_by=group_by,
        prices=prices or Prices(),
        **kwargs,  # type: ignore[arg-type]
    )


def test_clipped_at_both_window_edges():
    # 8 GPUs from 31 Oct 22:00 to 4 Nov 01:00; the window [1 Nov, 4 Nov) keeps 72 h → 576 GPU-hours.
    out = report([held(1, T(2026, 10, 31, 22, tzinfo=UTC), T(2026, 11, 4, 1, tzinfo=UTC))])
    assert [b.gpu_hours for b in out.buckets] == [Decimal(576)]
    assert out.total.cost == Decimal("1152.00")  # 576 × 2.00


def test_day_split_at_utc_midnight():
    # 4 GPUs from 1 Nov 22:30 to 2 Nov 01:15: 1.5 h on the 1st (6 GPU-h), 1.25 h on the 2nd (5 GPU-h).
    row = held(1, T(2026, 11, 1, 22, 30, tzinfo=UTC), T(2026, 11, 2, 1, 15, tzinfo=UTC), gpus=4)
    out = report([row], GroupBy.DAY)
    assert [(b.key, b.gpu_hours) for b in out.buckets] == [
        (dt.date(2026, 11, 1), Decimal(6)),
        (dt.date(2026, 11, 2), Decimal(5)),
    ]


def test_day_split_uses_utc_even_for_other_zones():
    # 01:00+02:00 on 2 Nov is 23:00 UTC on 1 Nov: one hour, all of it on the 1st (UTC).
    plus2 = dt.timezone(dt.timedelta(hours=2))
    pieces = day_pieces(T(2026, 11, 2, 0, 0, tzinfo=plus2), T(2026, 11, 2, 1, 0, tzinfo=plus2))
    assert pieces == [(dt.date(2026, 11, 1), dt.timedelta(hours=1))]


def test_borrowed_hours_and_cost_with_a_pool_override():
    # Pool 10's training GPU-hour costs 3.10 (override); pool 20 keeps the default 2.00.
    prices = Prices(overrides={(10, "training"): Decimal("3.10")})
    rows = [
        # 2 GPUs × 10 h in pool 10, borrowed → 20 GPU-h, 20 borrowed, 62.00
        held(1, T(2026, 11, 1, 0, tzinfo=UTC), T(2026, 11, 1, 10, tzinfo=UTC), gpus=2, borrowed=True),
        # 1 GPU × 5 h in pool 20 → 5 GPU-h, 10.00
        held(2, T(2026, 11, 2, 0, tzinfo=UTC), T(2026, 11, 2, 5, tzinfo=UTC), gpus=1, pool_id=20),
    ]
    by_pool = {b.key: b for b in report(rows, GroupBy.POOL, prices).buckets}
    assert (by_pool[10].gpu_hours, by_pool[10].borrowed_gpu_hours, by_pool[10].cost) == (20, 20, Decimal("62.00"))
    assert (by_pool[20].gpu_hours, by_pool[20].borrowed_gpu_hours, by_pool[20].cost) == (5, 0, Decimal("10.00"))
    total = report(rows, GroupBy.TENANT, prices).total
    assert (total.gpu_hours, total.borrowed_gpu_hours, total.cost) == (25, 20, Decimal("72.00"))


def test_preempted_counts_up_to_ended_at_and_once_as_a_preemption():
    # Booked 1 Nov 00:00 – 3 Nov 00:00, preempted at 1 Nov 06:00: 6 h × 8 GPUs = 48 GPU-h.
    row = held(
        1,
        T(2026, 11, 1, tzinfo=UTC),
        T(2026, 11, 3, tzinfo=UTC),
        status="preempted",
        borrowed=True,
        ended_at=T(2026, 11, 1, 6, tzinfo=UTC),
    )
    out = report([row], GroupBy.DAY)
    assert [(b.key, b.gpu_hours, b.preemptions) for b in out.buckets] == [(dt.date(2026, 11, 1), Decimal(48), 1)]
    assert out.total.preemptions == 1


def test_queued_rejected_cancelled_and_requested_never_count():
    window = (T(2026, 11, 1, tzinfo=UTC), T(2026, 11, 2, tzinfo=UTC))
    rows = [held(i, *window, status=s) for i, s in enumerate(["queued", "rejected", "cancelled", "requested"])]
    out = report(rows)
    assert out.buckets == [] and out.total.gpu_hours == 0


def test_a_running_reservation_counts_up_to_now_only():
    # Ready since 2 Nov 00:00, booked until 10 Nov; now is 2 Nov 12:00 → 12 h × 8 = 96 GPU-h.
    row = held(1, T(2026, 11, 2, tzinfo=UTC), T(2026, 11, 10, tzinfo=UTC), status="ready")
    out = report([row], now=T(2026, 11, 2, 12, tzinfo=UTC))
    assert out.total.gpu_hours == 96


def test_guaranteed_utilisation_is_non_borrowed_hours_over_the_guarantee():
    # Tenant 1 holds 16 guaranteed GPUs in pool 10 over a 72 h window → 1152 guaranteed GPU-h.
    # It used 8 GPUs × 72 h = 576 non-borrowed plus 100 borrowed: 576 / 1152 = 0.5.
    rows = [
        held(1, WINDOW_FROM, WINDOW_TO),
        held(2, T(2026, 11, 1, tzinfo=UTC), T(2026, 11, 1, 10, tzinfo=UTC), gpus=10, borrowed=True),
    ]
    out = report(rows, guarantees={(1, 10): 16, (2, 10): 8})
    assert out.buckets[0].guaranteed_utilisation == 0.5
    # Tenant 2 used nothing of its 8 guaranteed GPUs: it is listed, at 0 %.
    assert (out.buckets[1].key, out.buckets[1].gpu_hours, out.buckets[1].guaranteed_utilisation) == (2, 0, 0.0)
    by_reservation = report(rows, GroupBy.RESERVATION, guarantees={(1, 10): 16})
    assert all(b.guaranteed_utilisation is None for b in by_reservation.buckets)
