"""A node's energy history from what the console records: its power states and its bookings.

:func:`node_intervals` turns one node's power-state changes (``on``, ``powering-on``, ``off``,
``powering-off``, ``failed``) and the GPUs its reservations held over time into the
non-overlapping :class:`~.energy.Interval` list :func:`~.energy.energy_report` sums:

* ``on`` with GPUs held: ``busy``, loaded by the fraction of the node's GPUs held;
* ``on`` with none held: ``idle``;
* ``powering-on``: ``booting`` (counted at the busy draw, see :mod:`.energy`);
* ``off``: ``off``;
* ``powering-off``: ``idle`` (the OS is still shutting down);
* ``failed``: ``idle``. The console cannot tell whether a failed node still draws; counting it
  on and idle never flatters the saving.

Only a node that is ``on`` is ever busy: a booking on a node that is off or booting is a
reservation waiting for power, and the node draws what its power state says.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from scheduling.power.energy import Activity, Interval

#: Power state (``scheduling.models.Node.Power`` values) -> activity when no GPU is held.
STATE_ACTIVITY = {
    "on": Activity.IDLE,
    "powering-on": Activity.BOOTING,
    "off": Activity.OFF,
    "powering-off": Activity.IDLE,
    "failed": Activity.IDLE,
}


def _activity(state: str) -> Activity:
    return STATE_ACTIVITY.get(state, Activity.IDLE)


def node_intervals(
    start: datetime,
    end: datetime,
    initial_state: str,
    changes: Sequence[tuple[datetime, str]],
    held: Iterable[tuple[datetime, datetime, int]],
    gpus: int,
) -> list[Interval]:
    """The node's history over ``[start, end)``.

    ``initial_state`` is its power state before ``start``; ``changes`` the ``(at, new state)``
    pairs in time order (one at ``start`` applies from ``start``; those after ``end`` are ignored); ``held`` the ``(from, to, GPUs)`` of its bookings (overlapping
    bookings add up; the load is capped at the whole node). Adjacent pieces of the same
    activity and load are merged.
    """
    if end <= start:
        return []
    deltas: dict[datetime, int] = {}
    for lo, hi, count in held:
        lo, hi = max(lo, start), min(hi, end)
        if hi > lo and count > 0:
            deltas[lo] = deltas.get(lo, 0) + count
            deltas[hi] = deltas.get(hi, 0) - count
    inside = [(at, state) for at, state in changes if at < end]  # those at or before start apply at start
    points = sorted({start, end, *deltas, *(at for at, _ in inside if at > start)})
    out: list[Interval] = []
    state, held_now, next_change = initial_state, 0, 0
    for lo, hi in zip(points, points[1:], strict=False):
        while next_change < len(inside) and inside[next_change][0] <= lo:
            state = inside[next_change][1]
            next_change += 1
        held_now += deltas.get(lo, 0)
        activity, load = _activity(state), 1.0
        if state == "on" and held_now > 0:
            activity, load = Activity.BUSY, min(1.0, held_now / gpus) if gpus > 0 else 1.0
        last = out[-1] if out else None
        if last is not None and last.activity is activity and last.load == load and last.end == lo:
            out[-1] = Interval(last.start, hi, activity, load)
        else:
            out.append(Interval(lo, hi, activity, load))
    return out


__all__ = ["STATE_ACTIVITY", "node_intervals"]
