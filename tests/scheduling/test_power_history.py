"""The pure history builder (scheduling.power.history.node_intervals): power states and bookings
to intervals, checked against intervals written out by hand."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduling.power.energy import Activity, Interval
from scheduling.power.history import node_intervals

A = Activity


def h(hour: float) -> datetime:
    return datetime(2026, 3, 1, int(hour), int(round((hour % 1) * 60)), tzinfo=UTC)


def test_overlapping_bookings_add_up_and_cap_at_the_whole_node():
    held = [(h(1), h(4), 4), (h(2), h(3), 8)]
    got = node_intervals(h(0), h(5), "on", [], held, gpus=8)
    assert got == [
        Interval(h(0), h(1), A.IDLE),
        Interval(h(1), h(2), A.BUSY, 0.5),
        Interval(h(2), h(3), A.BUSY, 1.0),  # 12 of 8 GPUs: the whole node, no more
        Interval(h(3), h(4), A.BUSY, 0.5),
        Interval(h(4), h(5), A.IDLE),
    ]


def test_power_states_win_over_bookings_and_equal_neighbours_merge():
    changes = [(h(1), "powering-off"), (h(1.5), "off"), (h(3), "powering-on"), (h(3.25), "on"), (h(4), "failed")]
    got = node_intervals(h(0), h(5), "on", changes, [(h(2), h(5), 8)], gpus=8)
    assert got == [
        Interval(h(0), h(1.5), A.IDLE),  # on, then shutting down: both idle, one interval
        Interval(h(1.5), h(3), A.OFF),  # booked from 2 but off: off
        Interval(h(3), h(3.25), A.BOOTING),
        Interval(h(3.25), h(4), A.BUSY, 1.0),
        Interval(h(4), h(5), A.IDLE),  # failed: counted idle
    ]


def test_only_the_window_counts_and_a_change_at_its_start_applies():
    changes = [(h(1), "off"), (h(6), "on")]  # at the window's start, and after its end
    got = node_intervals(h(1), h(5), "on", changes, [(h(0), h(2), 4)], gpus=8)
    assert got == [Interval(h(1), h(5), A.OFF)]
    assert node_intervals(h(5), h(5), "on", [], [], gpus=8) == []
