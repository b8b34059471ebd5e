"""The shared queue pass (scheduling.placement.queue) in the replay simulator: patience waits for
one leaf group until max_wait, then takes a wider placement; the pass gives every waiting job an
estimated start and never places a job twice."""

from __future__ import annotations

import pytest

from scheduling.placement import PlacementEngine, Request, fat_tree
from scheduling.placement.queue import QueuedJob, queue_pass
from scheduling.replay import ReplayOptions, TraceJob, simulate
from tests.scheduling.sched_helpers import occupy

# Two leaf groups of 4 nodes (8 GPUs each). a and b leave one free node in each group until a
# ends at 100; c (2 nodes) fits at once only across both groups.
JOBS = [TraceJob("a", 0, 100, 24), TraceJob("b", 1, 200, 24), TraceJob("c", 2, 10, 16)]


@pytest.mark.parametrize(
    ("max_wait_s", "start", "groups"),
    [(0.0, 2, 2), (50.0, 52, 2), (300.0, 100, 1)],
)
def test_patience_in_the_replay(max_wait_s, start, groups):
    result = simulate(JOBS, fat_tree(8, 4), "topology", ReplayOptions(max_wait_s=max_wait_s))
    c = next(r for r in result.records if r.job.job_id == "c")
    assert (c.start, c.leaf_groups) == (start, groups)


def test_a_pass_places_in_order_and_estimates_the_rest():
    engine = PlacementEngine(fat_tree(8, 4), now=0.0)
    occupy(engine, range(6), end=100.0)  # 2 free nodes, until 100
    jobs = [
        QueuedJob("big", Request(gpus=48), 50.0, 0.0, gpus=48),  # 6 nodes: from 100
        QueuedJob("small", Request(gpus=16), 40.0, 0.0, gpus=16),  # fits now, ends before 100
        QueuedJob("late", Request(gpus=16), 500.0, 0.0, gpus=16),  # on small's nodes, beside big
    ]
    decisions = queue_pass(engine, jobs, reservations=len(jobs))
    by_key = {d.job.key: d for d in decisions}
    assert by_key["small"].placed_now and by_key["small"].estimated_start is None
    assert by_key["big"].estimated_start == 100.0
    # from 40 on the 2 nodes small frees, which big's 6 from 100 do not need: it delays nobody
    assert by_key["late"].estimated_start == 40.0
    big, late = by_key["big"].placement, by_key["late"].placement
    assert big is not None and late is not None and not set(big.node_ids) & set(late.node_ids)
    # a second pass at the same instant on the same engine cannot place anything twice
    again = queue_pass(engine, [jobs[1]], reservations=0)
    assert not again[0].placed_now


@pytest.mark.parametrize(("max_wait", "start", "groups"), [(0.0, 100.0, (0, 1)), (1000.0, 300.0, (0,))])
def test_the_heads_reservation_is_the_earliest_start_unless_patience_waits_for_one_group(max_wait, start, groups):
    # Groups of 4 nodes, all busy now. At 100 nodes 3 and 7 free (one per group); at 300 node 0
    # frees too, so from 300 group 0 holds two. Without patience the head is reserved at the
    # earliest start any placement fits (100, two groups), not later for a tighter one; with
    # patience up to 1000 it waits for one group (300).
    engine = PlacementEngine(fat_tree(8, 4), now=0.0)
    occupy(engine, [3, 7], end=100.0, booking_id="until-100")
    occupy(engine, [0], end=300.0, booking_id="until-300")
    occupy(engine, [1, 2, 4, 5, 6], end=5000.0, booking_id="long")
    head = QueuedJob("head", Request(gpus=16), 50.0, 0.0, max_wait=max_wait, gpus=16)

    (decision,) = queue_pass(engine, [head])

    assert decision.placement is not None and decision.estimated_start == start
    assert decision.placement.leaf_groups == groups
