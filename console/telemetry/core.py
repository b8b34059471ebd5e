"""The pure collector core: counter readings → per-link rates, error deltas, state, colour bucket.

No database, no processes: a sweep is a mapping ``(switch, port) → PortReading`` and the core
turns two consecutive sweeps into :class:`LinkStatus` rows. InfiniBand data counters
(``PortXmitData``/``PortRcvData``) count 4-octet words, so bytes = words × 4.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

WORD_BYTES = 4
#: Error counters the console watches (PortCounters names, as perfquery prints them).
ERROR_COUNTERS = (
    "SymbolErrorCounter",
    "LinkDownedCounter",
    "LinkErrorRecoveryCounter",
    "PortRcvErrors",
    "PortXmitDiscards",
)
#: The congestion counter (PortCounters): ticks a port had data to send and no credit to send it
#: with; shown as a rate (ticks/s) beside utilisation, never counted as an error.
XMIT_WAIT = "PortXmitWait"
#: Every PortCounters field a reader returns for a port (the errors and the congestion counter).
WATCHED_COUNTERS = (*ERROR_COUNTERS, XMIT_WAIT)
#: Utilisation colour buckets: upper bounds (fraction of line rate) of buckets 0..4; 5 = above.
BUCKETS = (0.01, 0.25, 0.5, 0.75, 0.9)
#: "Busy": a link at or above this fraction of its line rate (buckets 4 and 5); the page header
#: counts them and the legend says so.
BUSY_AT = BUCKETS[3]
NO_ERRORS: Mapping[str, int] = MappingProxyType(dict.fromkeys(ERROR_COUNTERS, 0))  # shared: read-only


def bucket_of(utilisation: float) -> int:
    """Colour bucket 0 (idle) … 5 (≥ 90 %) of a utilisation fraction."""
    return bisect_right(BUCKETS, utilisation)


@dataclass(frozen=True)
class PortReading:
    """One port's counters at one instant (``state``: Active, Down, Init, … or '' if unknown)."""

    xmit_words: int = 0
    rcv_words: int = 0
    errors: Mapping[str, int] = field(default_factory=dict)
    state: str = ""


@dataclass(frozen=True)
class LinkEnd:
    """The switch port a link is measured at, and the far end it goes to."""

    link_id: str
    switch: str
    port: int
    peer: str
    peer_port: int
    tier: str
    gbps: float
    cable: str = ""  # the design's cable type, e.g. "NDR-AOC"
    length_m: float = 0.0

    def describe(self) -> str:
        """Both ends and the cable: ``spine-01/1 ↔ su01-leaf-r1/33 (NDR-AOC, 10 m)``."""
        cable = ", ".join(p for p in (self.cable, f"{self.length_m:g} m" if self.length_m else "") if p)
        return f"{self.link_id} ↔ {self.peer}/{self.peer_port}" + (f" ({cable})" if cable else "")


@dataclass
class LinkStatus:
    """A link as the live view shows it after one sweep."""

    link_id: str
    up: bool
    tx_bps: float = 0.0  # switch port → peer
    rx_bps: float = 0.0  # peer → switch port
    utilisation: float = 0.0  # max of both directions, fraction of line rate
    bucket: int = 0
    errors: Mapping[str, int] = field(default_factory=dict)  # deltas over the sweep
    error_totals: Mapping[str, int] = field(default_factory=dict)
    xmit_wait: float = 0.0  # PortXmitWait ticks per second at the measuring port

    def as_dict(self) -> dict:
        errors, totals = self.errors, self.error_totals
        return {
            "id": self.link_id,
            "up": self.up,
            "tx_bps": round(self.tx_bps),
            "rx_bps": round(self.rx_bps),
            "util": round(self.utilisation, 4),
            "bucket": self.bucket,
            "errors": {k: v for k, v in errors.items() if v} if any(errors.values()) else {},
            "error_totals": {k: v for k, v in totals.items() if v and k != XMIT_WAIT} if any(totals.values()) else {},
            "xmit_wait": round(self.xmit_wait),
        }

    @property
    def key(self) -> tuple[bool, int, bool, int]:
        """What a live delta is about: state, colour bucket, erroring, congestion (the
        PortXmitWait rate's order of magnitude, so a steady rate is not re-sent every sweep)."""
        wait = int(math.log10(self.xmit_wait)) + 1 if self.xmit_wait >= 1 else 0
        return (self.up, self.bucket, any(self.errors.values()), wait)


def _delta(now: int, before: int) -> int:
    # A counter that went backwards was reset (or saturated and cleared): count from zero.
    return now - before if now >= before else now


def link_status(end: LinkEnd, now: PortReading | None, before: PortReading | None, dt: float) -> LinkStatus:
    """Rates and error deltas of one link between two readings ``dt`` seconds apart."""
    if now is None:
        return LinkStatus(end.link_id, up=False)
    up = now.state in ("", "Active")
    # (readers hand out error dicts that are never changed afterwards, and neither is a status's:
    # shared, not copied — a sweep builds thousands of these)
    totals = now.errors
    if before is None or dt <= 0:
        return LinkStatus(end.link_id, up=up, error_totals=totals)
    bits = WORD_BYTES * 8 / dt
    tx = _delta(now.xmit_words, before.xmit_words) * bits
    rx = _delta(now.rcv_words, before.rcv_words) * bits
    utilisation = 0.0
    if end.gbps and up:
        utilisation = min(1.0, max(tx, rx) / (end.gbps * 1e9))
    wait = 0.0
    if now.errors == before.errors:  # the usual case (a reader may even hand the same dict)
        errors = NO_ERRORS
    else:
        was = before.errors
        errors = {n: _delta(totals.get(n, 0), was.get(n, 0)) for n in ERROR_COUNTERS}
        wait = _delta(totals.get(XMIT_WAIT, 0), was.get(XMIT_WAIT, 0)) / dt
    bucket = bucket_of(utilisation) if up else 0
    return LinkStatus(end.link_id, up, tx, rx, utilisation, bucket, errors, totals, wait)


#: Sweeps in a row a port may go unanswered (its switch's MADs timed out: a busy SMA, a loaded
#: SM host) before its link counts as down; meanwhile it keeps its last state read.
UNANSWERED_GRACE = 3


def sweep_status(
    ends: Iterable[LinkEnd],
    now: Mapping[tuple[str, int], PortReading],
    before: Mapping[tuple[str, int], PortReading],
    dt: float,
    missed: Counter[tuple[str, int]] | None = None,
) -> dict[str, LinkStatus]:
    """Every link's status from two sweeps. With ``missed`` (unanswered sweeps in a row per port,
    updated here), a port that did not answer keeps its last reading's state for
    :data:`UNANSWERED_GRACE` sweeps instead of counting as down: no answer is not a link down."""
    out = {}
    for end in ends:
        key = (end.switch, end.port)
        reading, last = now.get(key), before.get(key)
        if missed is not None:
            if reading is not None:
                missed.pop(key, None)
            elif last is not None:
                missed[key] += 1
                if missed[key] <= UNANSWERED_GRACE:
                    out[end.link_id] = LinkStatus(
                        end.link_id, up=last.state in ("", "Active"), error_totals=last.errors
                    )
                    continue
        out[end.link_id] = link_status(end, reading, last, dt)
    return out


def state_due(
    ports: Mapping[str, Iterable[int]],
    before: Mapping[tuple[str, int], PortReading],
    sweep: int,
    every: int,
) -> set[tuple[str, int]] | None:
    """The ports whose link state (PortInfo) a sweep reads; None: all of them.

    Each port is read every ``every`` sweeps, the ports of a switch spread evenly over them (so
    every sweep costs the same), and a port that was not Active (or not answering) last sweep is
    read every sweep: a link going down shows within ``every`` sweeps, one coming back within one."""
    if every <= 1 or not before:
        return None
    due = set()
    for switch, plist in ports.items():
        for i, port in enumerate(plist):
            key = (switch, port)
            last = before.get(key)
            if (i + sweep) % every == 0 or last is None or last.state != "Active":
                due.add(key)
    return due


def changed_links(current: Mapping[str, LinkStatus], published: Mapping[str, tuple[bool, int, bool, int]]) -> list[str]:
    """Links whose state, colour bucket or erroring changed since the last published delta."""
    return [lid for lid, st in current.items() if published.get(lid) != st.key]
