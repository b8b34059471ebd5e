"""Is a stored discovery still what the fabric looks like? Its age, and OpenSM's sweeps since.

A compare that answers from an old discovery answers about an old fabric: a cable pulled or put
back after the sweep is invisible to it. So ``fabric compare`` discovers afresh when the stored
discovery is older than ``FABRIC_COMPARE_MAX_AGE_S`` (default 10 s) or when OpenSM has ended a
heavy sweep since (a link went down or came up, a switch rebooted: any change OpenSM saw).

OpenSM reports neither its sweeps nor their count on the wire; it logs the end of every heavy
sweep (``SUBNET UP``, flushed at once with ``force_log_flush TRUE``). A discovery remembers how
far the log went when it began (``summary["sm_log_mark"]``); a ``SUBNET UP`` after that mark
means the SM swept since. The fabric's agent reads the log on its SM host
(:mod:`console.fabric.discovery.sources`). Where no log is reachable (a UFM fabric, an SM host
without ``opensm_log``, an agent not connected) only the age counts, and the answer says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from console.fabric.discovery import sources
from console.fabric.models import DiscoveryRun, Fabric

#: Where a discovery stores the OpenSM log mark taken just before its ibnetdiscover.
MARK_KEY = "sm_log_mark"


def max_age_s() -> float:
    """How old a stored discovery may be before a compare discovers afresh."""
    return float(settings.FABRIC_COMPARE_MAX_AGE_S)


@dataclass(frozen=True)
class Freshness:
    """How current a stored discovery is: its age and whether OpenSM swept since it began."""

    run: DiscoveryRun | None
    age_s: float | None
    max_age_s: float
    #: None: cannot tell (no OpenSM log reachable, or the run predates the marks).
    sm_swept_since: bool | None

    @property
    def too_old(self) -> bool:
        """Older than the limit."""
        return self.age_s is not None and self.age_s > self.max_age_s

    @property
    def stale(self) -> bool:
        """No discovery, too old, or the SM swept since: a compare should discover afresh."""
        return self.run is None or self.too_old or bool(self.sm_swept_since)

    def why(self) -> str:
        """In words: why the stored discovery is (or is not) current."""
        if self.run is None:
            return "there was no discovery yet"
        age = f"discovery {self.run.pk} is {self.age_s:.1f} s old (limit {self.max_age_s:g} s)"
        if self.sm_swept_since:
            return f"{age} and OpenSM ended a heavy sweep after it began"
        if self.sm_swept_since is None:
            return f"{age}; OpenSM's sweeps cannot be watched for this fabric"
        return f"{age} and OpenSM has not swept since"


def age_of(run: DiscoveryRun, now: datetime | None = None) -> float:
    """Seconds since ``run`` was stored."""
    return max(0.0, ((now or timezone.now()) - run.created_at).total_seconds())


def assess(fabric: Fabric, run: DiscoveryRun | None, *, now: datetime | None = None) -> Freshness:
    """How current ``run`` (the fabric's stored discovery) is."""
    if run is None:
        return Freshness(None, None, max_age_s(), None)
    mark = (run.summary or {}).get(MARK_KEY)
    # read on the SM host: by the fabric's agent, or here for a lab without one
    swept = sources.source_for(fabric).swept_since(mark) if isinstance(mark, int) else None
    return Freshness(run, round(age_of(run, now), 3), max_age_s(), swept)


def stamp(document: dict[str, Any], freshness: Freshness, *, discovered_now: bool, note: str) -> dict[str, Any]:
    """The compare document with what it compares: the discovery's time and age, whether this
    compare ran it, and why (answers only: never stored on the run)."""
    run = freshness.run
    assert run is not None
    return {
        **document,
        "discovered_at": run.created_at.isoformat(),
        "discovery_age_s": freshness.age_s,
        "discovered_now": discovered_now,
        "freshness": {
            "max_age_s": freshness.max_age_s,
            "sm_swept_since": freshness.sm_swept_since,
            "stale": freshness.stale,
            "note": note,
        },
    }
