"""Energy accounting (scheduling.power.energy): kWh, always-on baseline, saved fraction, grouping."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from designer.builtin_catalogue import default_catalogue
from scheduling.power.energy import (
    Activity,
    EnergyRow,
    Interval,
    NodeHistory,
    NodeWatts,
    Totals,
    clip,
    energy_report,
    split_by_day,
    total_row,
    totals,
)

# Round figures so the arithmetic below can be checked by hand: 10 kW busy, 2 kW idle, 50 W off.
WATTS = NodeWatts(busy=10_000, idle=2_000, off=50)
BUSY, IDLE, OFF, BOOTING = Activity.BUSY, Activity.IDLE, Activity.OFF, Activity.BOOTING


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=UTC)


# Node a (pool p1): busy 20:30-22:30 (2 h, all GPUs), idle 22:30-23:30 (1 h), off 23:30-00:30 (1 h,
# across midnight).
NODE_A = NodeHistory(
    "a",
    "p1",
    WATTS,
    (
        Interval(at(1, 20, 30), at(1, 22, 30), BUSY),
        Interval(at(1, 22, 30), at(1, 23, 30), IDLE),
        Interval(at(1, 23, 30), at(2, 0, 30), OFF),
    ),
)
# Node b (pool p2): booting 20:30-21:00 (0.5 h), busy at half load 21:00-22:00 (1 h),
# off 22:00-00:30 (2.5 h).
NODE_B = NodeHistory(
    "b",
    "p2",
    WATTS,
    (
        Interval(at(1, 20, 30), at(1, 21), BOOTING),
        Interval(at(1, 21), at(1, 22), BUSY, load=0.5),
        Interval(at(1, 22), at(2, 0, 30), OFF),
    ),
)


def test_two_nodes_by_pool_with_the_arithmetic_written_out():
    rows = {row.key: row for row in energy_report([NODE_A, NODE_B], group_by="pool")}

    # a: busy 10 kW x 2 h = 20; idle 2 kW x 1 h = 2; off 0.05 kW x 1 h = 0.05      -> 22.05 kWh
    #    always on: 20 + 2 + the off hour at idle 2                                  -> 24 kWh
    assert rows["p1"].kwh == pytest.approx(22.05)
    assert rows["p1"].kwh_always_on == pytest.approx(24.0)
    # b: booting at the busy draw 10 kW x 0.5 h = 5; half load (2 + 8 x 0.5) kW x 1 h = 6;
    #    off 0.05 kW x 2.5 h = 0.125                                                 -> 11.125 kWh
    #    always on: booting at idle 2 x 0.5 = 1; 6; off hours at idle 2 x 2.5 = 5   -> 12 kWh
    assert rows["p2"].kwh == pytest.approx(11.125)
    assert rows["p2"].kwh_always_on == pytest.approx(12.0)
    total = total_row(rows.values())
    assert total.kwh == pytest.approx(33.175)
    assert total.kwh_always_on == pytest.approx(36.0)
    assert total.saved_fraction == pytest.approx(1 - 33.175 / 36)  # 7.85 %


def test_grouping_by_day_cuts_intervals_at_utc_midnight():
    rows = energy_report([NODE_A, NODE_B], group_by="day")

    # Dec 1: a 20 + 2 + off 23:30-24:00 0.025; b 5 + 6 + off 22:00-24:00 0.1 -> 33.125
    #        always on: a 20 + 2 + 1; b 1 + 6 + 4                            -> 34
    # Dec 2: a off 0.025 + b off 0.025 = 0.05; always on 1 + 1 = 2
    assert [(r.key, round(r.kwh, 6), round(r.kwh_always_on, 6)) for r in rows] == [
        ("2026-12-01", 33.125, 34.0),
        ("2026-12-02", 0.05, 2.0),
    ]
    assert rows[1].saved_fraction == pytest.approx(0.975)


def test_grouping_by_node():
    rows = energy_report([NODE_A, NODE_B], group_by="node")

    assert [(r.key, round(r.kwh, 6)) for r in rows] == [("a", 22.05), ("b", 11.125)]


def test_totals_are_the_four_sums_and_give_the_same_kwh_as_the_intervals():
    summed = totals(NODE_B.intervals)

    assert summed == Totals(on_s=3600, off_s=9000, booting_s=1800, busy_load_s=1800)
    assert summed.kwh(WATTS) == pytest.approx(11.125)
    assert (totals(NODE_A.intervals) + summed).kwh_always_on(WATTS) == pytest.approx(36.0)


def test_a_node_never_switched_off_saves_nothing():
    history = NodeHistory(
        "c", "p1", WATTS, (Interval(at(1, 0), at(1, 6), BUSY, 0.25), Interval(at(1, 6), at(1, 12), IDLE))
    )

    (row,) = energy_report([history])

    # (2 + 8 x 0.25) kW x 6 h + 2 kW x 6 h = 24 + 12 = 36 kWh either way.
    assert row.kwh == pytest.approx(36.0) == row.kwh_always_on
    assert row.saved_fraction == 0.0


def test_no_energy_gives_a_zero_saved_fraction():
    assert EnergyRow("empty", 0.0, 0.0).saved_fraction == 0.0


def test_split_by_day_and_clip():
    pieces = split_by_day(Interval(at(1, 22), at(3, 1), OFF))

    assert [(day.isoformat(), p.start, p.end) for day, p in pieces] == [
        ("2026-12-01", at(1, 22), at(2, 0)),
        ("2026-12-02", at(2, 0), at(3, 0)),
        ("2026-12-03", at(3, 0), at(3, 1)),
    ]
    assert clip(NODE_A.intervals, at(1, 22), at(1, 23, 45)) == [
        Interval(at(1, 22), at(1, 22, 30), BUSY),
        Interval(at(1, 22, 30), at(1, 23, 30), IDLE),
        Interval(at(1, 23, 30), at(1, 23, 45), OFF),
    ]


def test_catalogue_figures_for_a_dgx_h100():
    watts = NodeWatts.of(default_catalogue().nodes["DGX-H100"])

    assert watts == NodeWatts(busy=10_200, idle=1_800, off=45)
    # One DGX-H100 off for a day instead of idle saves (1,800 - 45) W x 24 h = 42.12 kWh.
    day = Totals(off_s=86_400)
    assert day.kwh_always_on(watts) - day.kwh(watts) == pytest.approx(42.12)


def test_invalid_figures_and_intervals_are_refused():
    with pytest.raises(ValueError):
        NodeWatts(busy=1_000, idle=2_000, off=0)
    with pytest.raises(ValueError):
        Interval(at(1, 2), at(1, 1), IDLE)
    with pytest.raises(ValueError):
        Interval(at(1, 1), at(1, 2), BUSY, load=1.5)
