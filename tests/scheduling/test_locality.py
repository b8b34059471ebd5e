"""Bounded locality (issue 39, ``scheduling.placement.locality``): a job that must wait takes a
later window spanning fewer leaf groups when it opens within a tenth of its run time (15 minutes
at most) after its earliest one; never under first-fit, never beyond that slack."""

from __future__ import annotations

import pytest

from scheduling.placement import PlacementEngine, Request, rail_optimized
from scheduling.placement.locality import tighter_window
from scheduling.placement.queue import QueuedJob, queue_pass
from tests.scheduling.sched_helpers import occupy


def pool(policy: str, su0_busy_until: float) -> PlacementEngine:
    """Two SUs of four nodes: SU 0's nodes free at 100 (two) and ``su0_busy_until`` (two), SU 1's
    at 100 (two) and never (two). The earliest window of four nodes is at 100, over both SUs."""
    engine = PlacementEngine(rail_optimized(2, nodes_per_su=4), policy=policy)
    occupy(engine, [0, 1, 4, 5], end=100, booking_id="short")
    occupy(engine, [2, 3], end=su0_busy_until, booking_id="su0")
    occupy(engine, [6, 7], booking_id="forever")
    return engine


def window(engine: PlacementEngine, duration: float):
    request = Request(nodes=4, start=0, end=duration)
    earliest = engine.earliest_window(request, after=0)
    assert earliest is not None and earliest.start == 100 and len(earliest.leaf_groups) == 2
    return tighter_window(engine, request, earliest)


def test_a_tighter_window_soon_after_the_earliest_wins():
    chosen = window(pool("topology", su0_busy_until=500), duration=10_000)  # 400 s later ≤ 15 min
    assert (chosen.start, chosen.leaf_groups, chosen.node_ids) == (500, (0,), (0, 1, 2, 3))


@pytest.mark.parametrize(
    ("policy", "su0_busy_until", "duration"),
    [
        ("topology", 1_100, 100_000),  # 1,000 s later: over the 15-minute cap
        ("topology", 500, 2_000),  # 400 s later: over a tenth of a 2,000-s run
        ("first-fit", 500, 10_000),  # the baseline keeps its earliest window
    ],
)
def test_no_tighter_window_beyond_the_slack_or_under_first_fit(policy, su0_busy_until, duration):
    chosen = window(pool(policy, su0_busy_until), duration)
    assert chosen.start == 100 and len(chosen.leaf_groups) == 2


def test_the_queue_pass_reserves_the_tighter_window_and_backfills_before_it():
    engine = pool("topology", su0_busy_until=500)
    engine.advance(0)
    big = QueuedJob("big", Request(nodes=4), duration=10_000, submitted=0)
    small = QueuedJob("small", Request(nodes=2), duration=400, submitted=0)  # fits before 500
    decisions = queue_pass(engine, [big, small])
    assert decisions[0].estimated_start == 500 and decisions[0].placement.leaf_groups == (0,)
    engine.advance(100)
    later = queue_pass(engine, [small])
    assert later[0].placed_now  # the nodes free at 100 are used while the big job waits
