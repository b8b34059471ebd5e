"""Energy from per-node power-state histories: kWh, the always-on baseline and the fraction saved.

A node's history is a list of non-overlapping :class:`Interval` of one :class:`Activity`:

* ``busy``: on, running work; draws ``idle + (busy - idle) x load`` where ``load`` is the
  fraction of its GPUs in use (1.0: the catalogue's busy figure, all GPUs loaded);
* ``idle``: on, no work (``powering-off`` counts here: the OS is still shutting down);
* ``off``: powered off, the BMC on standby;
* ``booting``: power-on until the OS is up and the HCA ports are active. **Booting counts at the
  busy draw**: POST runs the fans flat out and initialises every GPU and HCA, and counting it high
  means the saving reported is a lower bound, never flattered by boots.

The **always-on baseline** is the same history with every non-busy second at the idle draw: what
the pool would have drawn had no node ever been switched off. ``saved_fraction`` is
``1 - kwh / kwh_always_on``.

Because the draw is linear in the load, a history reduces to four sums (:class:`Totals`); the
replay simulator accumulates those directly instead of building intervals.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import Literal

from designer.catalogue import NodeType

JOULES_PER_KWH = 3_600_000.0


class Activity(StrEnum):
    """What a node is doing over an interval, for energy purposes."""

    BUSY = "busy"
    IDLE = "idle"
    OFF = "off"
    BOOTING = "booting"


@dataclass(frozen=True, slots=True)
class NodeWatts:
    """A node type's draw in watts: busy (all GPUs loaded), idle (on, no work), off (BMC standby)."""

    busy: float
    idle: float
    off: float

    def __post_init__(self) -> None:
        if not 0 <= self.off <= self.idle <= self.busy:
            raise ValueError(f"expected 0 <= off <= idle <= busy watts, got {self.off}, {self.idle}, {self.busy}")

    @classmethod
    def of(cls, node_type: NodeType) -> NodeWatts:
        """The catalogue's figures for ``node_type`` (idle defaults to a fifth of busy)."""
        return cls(busy=node_type.power_w, idle=node_type.idle_watts(), off=node_type.off_power_w)


@dataclass(frozen=True, slots=True)
class Interval:
    """One stretch of a node's history, ``[start, end)``."""

    start: datetime
    end: datetime
    activity: Activity
    #: Fraction of the node's GPUs in use (``busy`` only).
    load: float = 1.0

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError("an interval cannot end before it starts")
        if not 0.0 <= self.load <= 1.0:
            raise ValueError("load is a fraction of the node's GPUs, 0 to 1")


@dataclass(frozen=True, slots=True)
class Totals:
    """Seconds a node (or many nodes of one type) spent in each state.

    ``on_s`` covers busy and idle time alike (both draw at least the idle figure);
    ``busy_load_s`` is busy time weighted by load (GPU-seconds / GPUs per node).
    """

    on_s: float = 0.0
    off_s: float = 0.0
    booting_s: float = 0.0
    busy_load_s: float = 0.0

    def __add__(self, other: Totals) -> Totals:
        return Totals(
            self.on_s + other.on_s,
            self.off_s + other.off_s,
            self.booting_s + other.booting_s,
            self.busy_load_s + other.busy_load_s,
        )

    def kwh(self, watts: NodeWatts) -> float:
        """Energy drawn."""
        joules = (
            watts.idle * self.on_s
            + (watts.busy - watts.idle) * self.busy_load_s
            + watts.off * self.off_s
            + watts.busy * self.booting_s
        )
        return joules / JOULES_PER_KWH

    def kwh_always_on(self, watts: NodeWatts) -> float:
        """Energy the same work would have drawn with the node never off (nor booting)."""
        on_all_along = self.on_s + self.off_s + self.booting_s
        joules = watts.idle * on_all_along + (watts.busy - watts.idle) * self.busy_load_s
        return joules / JOULES_PER_KWH


def totals(intervals: Iterable[Interval]) -> Totals:
    """The four sums of a history."""
    on = off = booting = load = 0.0
    for interval in intervals:
        seconds = (interval.end - interval.start).total_seconds()
        if interval.activity is Activity.OFF:
            off += seconds
        elif interval.activity is Activity.BOOTING:
            booting += seconds
        else:
            on += seconds
            if interval.activity is Activity.BUSY:
                load += seconds * interval.load
    return Totals(on, off, booting, load)


@dataclass(frozen=True, slots=True)
class NodeHistory:
    """One node's history with what it needs for accounting: its pool and its type's draw."""

    node: str
    pool: str
    watts: NodeWatts
    intervals: tuple[Interval, ...]


@dataclass(frozen=True, slots=True)
class EnergyRow:
    """Energy of one group (a pool, a UTC day or a node)."""

    key: str
    kwh: float
    kwh_always_on: float

    @property
    def saved_fraction(self) -> float:
        """Fraction of the always-on energy saved (0.0 when nothing was drawn)."""
        return 1.0 - self.kwh / self.kwh_always_on if self.kwh_always_on > 0 else 0.0


def split_by_day(interval: Interval) -> list[tuple[date, Interval]]:
    """``interval`` cut at UTC midnights, each piece with its day."""
    pieces: list[tuple[date, Interval]] = []
    start = interval.start
    while True:
        day = start.astimezone(UTC).date()
        midnight = datetime.combine(day + timedelta(days=1), time(0), tzinfo=UTC)
        if interval.end <= midnight:
            pieces.append((day, Interval(start, interval.end, interval.activity, interval.load)))
            return pieces
        pieces.append((day, Interval(start, midnight, interval.activity, interval.load)))
        start = midnight


def clip(intervals: Iterable[Interval], start: datetime, end: datetime) -> list[Interval]:
    """The parts of ``intervals`` inside ``[start, end)``."""
    out = []
    for interval in intervals:
        lo, hi = max(interval.start, start), min(interval.end, end)
        if hi > lo:
            out.append(Interval(lo, hi, interval.activity, interval.load))
    return out


def energy_report(
    histories: Iterable[NodeHistory], group_by: Literal["pool", "day", "node"] = "pool"
) -> list[EnergyRow]:
    """kWh, always-on kWh and saved fraction per pool, UTC day (ISO date) or node, sorted by key."""
    sums: dict[str, list[float]] = {}
    for history in histories:
        # The four sums per key first, then the watts once per key (linear in the sums).
        grouped: dict[str, list[Interval]] = {}
        if group_by == "day":
            for interval in history.intervals:
                for day, piece in split_by_day(interval):
                    grouped.setdefault(day.isoformat(), []).append(piece)
        else:
            grouped[history.pool if group_by == "pool" else history.node] = list(history.intervals)
        for key, pieces in grouped.items():
            summed = totals(pieces)
            acc = sums.setdefault(key, [0.0, 0.0])
            acc[0] += summed.kwh(history.watts)
            acc[1] += summed.kwh_always_on(history.watts)
    return [EnergyRow(key, kwh, always) for key, (kwh, always) in sorted(sums.items())]


def total_row(rows: Iterable[EnergyRow], key: str = "total") -> EnergyRow:
    """The sum of ``rows``."""
    listed = list(rows)
    return EnergyRow(key, sum(r.kwh for r in listed), sum(r.kwh_always_on for r in listed))


__all__ = [
    "Activity",
    "EnergyRow",
    "Interval",
    "JOULES_PER_KWH",
    "NodeHistory",
    "NodeWatts",
    "Totals",
    "clip",
    "energy_report",
    "split_by_day",
    "total_row",
    "totals",
]
