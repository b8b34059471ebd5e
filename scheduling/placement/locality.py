"""Bounded locality for a job that must wait (issue 39): a later, tighter window when it is near.

A job that does not fit now is given its earliest window (:meth:`PlacementEngine.earliest_window`)
and the nodes free then, however scattered: on a busy pool that is where most multi-node jobs
start, and a scattered start costs the job its whole run (traffic across the spines). So when the
earliest window spans more leaf groups than the job needs, the windows opening within a tenth of
the job's own run time after it, and never more than a quarter of an hour (:data:`LOCALITY_SLACK`,
:data:`LOCALITY_SLACK_MAX_S`; capacity only grows at a booking's end, so those are the only
candidates), are searched too, and the one spanning the fewest groups wins (the earliest among
equals). The job starts at most that much later and runs packed; while it waits, backfill uses
the nodes (they are not booked before its window starts), so the pool stays as busy. A job that
fits now is placed now (no wait for locality).

The first-fit baseline keeps its earliest window: it has no notion of a tighter one.
"""

from __future__ import annotations

from .engine import PlacementEngine
from .request import Request
from .types import Placement, Policy

#: How much later than its earliest window, as a share of its run time, a job may start for a
#: window spanning fewer leaf groups (0.1: a one-hour job waits at most 6 minutes more) ...
LOCALITY_SLACK = 0.1
#: ... and at most this long: a long job's wait was what left the pool idle (issue 39's sweep:
#: a tenth without the cap lost up to 1.3 % utilisation while jobs waited; with it, 0.75 %).
LOCALITY_SLACK_MAX_S = 900.0


def tighter_window(
    engine: PlacementEngine,
    request: Request,
    earliest: Placement | None,
    slack: float = LOCALITY_SLACK,
    slack_max_s: float = LOCALITY_SLACK_MAX_S,
) -> Placement | None:
    """The window spanning the fewest leaf groups among ``earliest`` and those opening within
    ``slack`` × its length (at most ``slack_max_s``) after it; ``earliest`` itself when it is
    already as tight as the job can be, under first-fit, or for one node."""
    if earliest is None or slack <= 0 or engine.policy is not Policy.TOPOLOGY:
        return earliest
    shape = engine.shape(request)
    if shape is None or not shape.whole or shape.nodes <= 1:
        return earliest
    largest = engine.eligibility(request, shape.gpus_per_node).largest_group
    least = -(-shape.nodes // max(1, largest))
    length = earliest.end - earliest.start
    horizon = earliest.start + min(slack * length, slack_max_s)
    best = earliest
    for start in engine.state.end_times(earliest.start):
        if len(best.leaf_groups) <= least or start > horizon:
            break
        found = engine.search(request, start, start + length, explain=False)
        if isinstance(found, Placement) and len(found.leaf_groups) < len(best.leaf_groups):
            best = found
    return best


__all__ = ["LOCALITY_SLACK", "LOCALITY_SLACK_MAX_S", "tighter_window"]
