"""A one-node job placed now fills a backfill hole (a node free now, reserved later) in any leaf
group before it takes an open node, so the open node is still there for the next job.

Issue 16 (packing without losing throughput): the topology policy sent such a job to the fullest
leaf group, i.e. onto an open node while a hole in another group stayed idle until its
reservation started, and the next job that needed an open node waited.
"""

from __future__ import annotations

from scheduling.placement import PlacementEngine, Request, fat_tree
from scheduling.placement.queue import QueuedJob, queue_pass
from scheduling.placement.selection import hole_first_node, time_slack
from scheduling.placement.types import Window
from tests.scheduling.sched_helpers import occupy


def _pool() -> PlacementEngine:
    # Two leaf groups of 4 whole nodes (8 GPUs each), at time 0:
    #   group 0: nodes 0-2 busy until 1000, node 3 open (free, nothing booked);
    #   group 1: nodes 4-5 busy until 1000, node 6 free now but reserved from 100 (a hole of
    #   100 s), node 7 open.
    engine = PlacementEngine(fat_tree(8, 4), now=0.0)
    occupy(engine, [0, 1, 2, 4, 5], end=1000.0, booking_id="long")
    occupy(engine, [6], start=100.0, end=1000.0, booking_id="reserved")
    return engine


def _job(key: str, duration: float) -> QueuedJob:
    return QueuedJob(key, Request(gpus=8), duration, 0.0, gpus=8)


def test_a_short_one_node_job_takes_the_hole_and_nobody_waits():
    # short (50 s) fits in node 6's hole; long1 and long2 (200 s) fit only on open nodes 3 and 7.
    # Worked out: short -> 6 (the hole, in group 1 although group 0 is the fuller one, with 1
    # free node against 2), long1 -> 3, long2 -> 7: all three start at 0. Filling the fullest
    # group first (the old rule) put short on node 3, long1 on 7 and left long2 waiting until
    # short ends at 50 while node 6 idled.
    engine = _pool()
    decisions = queue_pass(engine, [_job("short", 50.0), _job("long1", 200.0), _job("long2", 200.0)])
    placed = {d.job.key: d.placement.node_ids for d in decisions if d.placed_now and d.placement is not None}
    assert placed == {"short": (6,), "long1": (3,), "long2": (7,)}


def test_the_tightest_hole_first_and_an_open_node_only_without_one():
    engine = _pool()
    occupy(engine, [3], start=300.0, end=1000.0, booking_id="reserved-later")  # node 3: hole of 300 s
    window = Window([1, 2], {0: [3], 1: [6, 7]}.__getitem__)
    everything = frozenset(range(8))
    # 50 s: node 6 leaves 50 s idle before its reservation, node 3 250 s: node 6.
    assert hole_first_node(window, everything, time_slack(engine.state, 0.0, 50.0)) == 6
    # 150 s does not fit node 6's hole (the engine's window would not offer it); of 3 and 7 the
    # hole (3) goes first although 7 is open.
    window = Window([1, 1], {0: [3], 1: [7]}.__getitem__)
    assert hole_first_node(window, everything, time_slack(engine.state, 0.0, 150.0)) == 3
    # no hole at all (an empty pool): the fullest group's open node, then the lowest index
    empty = PlacementEngine(fat_tree(8, 4), now=0.0)
    window = Window([2, 1], {0: [2, 3], 1: [7]}.__getitem__)
    assert hole_first_node(window, everything, time_slack(empty.state, 0.0, 50.0)) == 7
    window = Window([2, 2], {0: [2, 3], 1: [6, 7]}.__getitem__)
    assert hole_first_node(window, everything, time_slack(empty.state, 0.0, 50.0)) == 2
