"""Placement engine behaviour a user would notice: where gangs land, and why they do not.

Fabrics are drawn as SUs (leaf groups) of nodes, e.g. ``SU0 [####........]`` = 4 busy, 8 free.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduling.placement import (
    BookingConflict,
    NodeState,
    Placement,
    PlacementEngine,
    Policy,
    Rejection,
    RejectReason,
    Request,
    fat_tree,
    rail_optimized,
)
from tests.scheduling.sched_helpers import TENANT, occupy, overlapping_pairs

EPOCH_10H = datetime(2025, 3, 3, 10, 0, tzinfo=UTC).timestamp()
HOUR = 3600.0


def test_128_gpus_land_under_one_scalable_unit_rail_aligned():
    engine = PlacementEngine(rail_optimized(2))

    result = engine.preview(Request(gpus=128))

    assert isinstance(result, Placement)
    assert len(result.node_ids) == 16
    assert result.gpus == 128 and result.gpus_per_node == 8
    assert result.leaf_groups == (0,)
    assert len(result.leaves) == 8  # one leaf per rail of SU 0
    assert result.spines == () and result.max_hops == 0
    assert result.rail_aligned


def test_best_fit_prefers_the_fullest_group_that_fits_keeping_a_whole_group_free():
    # SU0 [############....................] 12 busy, 20 free; SU1 all free.
    engine = PlacementEngine(rail_optimized(2))
    occupy(engine, range(12))

    result = engine.preview(Request(nodes=16))

    assert isinstance(result, Placement)
    assert result.leaf_groups == (0,)
    assert all(12 <= n < 32 for n in result.node_ids)


def test_fewest_groups_then_fullest_groups_so_the_free_su_stays_whole():
    # SU0 20 free, SU1 20 free, SU2 32 free: 40 nodes need 2 groups; SU0+SU1 keep SU2 whole.
    engine = PlacementEngine(rail_optimized(3))
    occupy(engine, [*range(12), *range(32, 44)])

    result = engine.preview(Request(nodes=40))

    assert isinstance(result, Placement)
    assert result.leaf_groups == (0, 1)
    assert result.max_hops == 2
    assert len(result.spines) == engine.topology.spines  # every leaf uplinks to every spine
    assert len(result.leaves) == 16


def test_first_fit_takes_the_lowest_free_nodes_whatever_the_topology():
    engine = PlacementEngine(rail_optimized(2), policy=Policy.FIRST_FIT)
    occupy(engine, range(12))

    result = engine.preview(Request(nodes=24))

    assert isinstance(result, Placement)
    assert result.node_ids == tuple(range(12, 36))
    assert result.leaf_groups == (0, 1)


def test_gang_is_all_or_nothing():
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, range(20))

    result = engine.place(Request(nodes=13), "big")

    assert isinstance(result, Rejection)
    assert result.reason is RejectReason.NO_CAPACITY
    assert set(engine.state.bookings) == {"busy"}
    assert engine.state.group_free_nodes == [12]


def test_preview_reserves_nothing_and_place_books():
    engine = PlacementEngine(rail_optimized(1))

    preview = engine.preview(Request(nodes=4))
    assert isinstance(preview, Placement)
    assert engine.state.bookings == {}

    placed = engine.place(Request(nodes=4), "r1", TENANT)
    assert placed == preview
    assert engine.state.bookings["r1"].node_ids == preview.node_ids
    assert engine.state.group_free_nodes == [28]


def test_same_leaf_rejection_explains_with_numbers_and_the_earliest_window():
    # SU0: 20 nodes busy until 14:00; SU1: 20 nodes busy until 16:00. 12 free in each.
    engine = PlacementEngine(rail_optimized(2), now=EPOCH_10H)
    occupy(engine, range(20), end=EPOCH_10H + 4 * HOUR, booking_id="a")
    occupy(engine, range(32, 52), end=EPOCH_10H + 6 * HOUR, booking_id="b")
    request = Request(nodes=16, same_leaf=True, start=EPOCH_10H, end=EPOCH_10H + 4 * HOUR)

    result = engine.preview(request)

    assert isinstance(result, Rejection)
    assert result.reason is RejectReason.SAME_LEAF
    assert result.message == (
        "16 nodes under one leaf requested; the largest free leaf group has 12; earliest window with 16 is 14:00–18:00"
    )
    assert result.details["largest_free_group"] == 12
    assert result.details["earliest_start"] == EPOCH_10H + 4 * HOUR
    # Without the constraint the same request fits now, across two SUs.
    spread = engine.preview(Request(nodes=16, start=EPOCH_10H, end=EPOCH_10H + 4 * HOUR))
    assert isinstance(spread, Placement) and spread.leaf_groups == (0, 1)


def test_max_switch_hops_zero_behaves_like_same_leaf():
    engine = PlacementEngine(rail_optimized(2))
    occupy(engine, [*range(20), *range(32, 52)])

    result = engine.preview(Request(nodes=16, max_switch_hops=0))

    assert isinstance(result, Rejection) and result.reason is RejectReason.SAME_LEAF


def test_too_large_and_no_eligible_nodes_are_explained():
    engine = PlacementEngine(rail_optimized(1))

    too_large = engine.preview(Request(gpus=512))
    wrong_model = engine.preview(Request(gpus=8, gpu_model="B200"))
    too_wide = engine.preview(Request(nodes=40, same_leaf=True))

    assert isinstance(too_large, Rejection) and too_large.reason is RejectReason.TOO_LARGE
    assert "64 nodes (512 GPUs) requested" in too_large.message
    assert "only 32 eligible nodes (256 GPUs)" in too_large.message
    assert isinstance(wrong_model, Rejection)
    assert wrong_model.reason is RejectReason.NO_ELIGIBLE_NODES
    assert "gpu_model=B200" in wrong_model.message
    assert isinstance(too_wide, Rejection) and too_wide.reason is RejectReason.TOO_LARGE


def test_no_capacity_message_counts_free_nodes():
    engine = PlacementEngine(rail_optimized(2))
    occupy(engine, range(50), end=100.0)

    result = engine.preview(Request(nodes=16, end=50.0))

    assert isinstance(result, Rejection)
    assert result.message.startswith("16 nodes (128 GPUs) requested; 14 nodes are free")
    assert "earliest window with 16 is t=100s–t=150s" in result.message


def test_rail_aligned_constraint_avoids_miswired_nodes_and_topology_prefers_aligned():
    topology = rail_optimized(1, miswired_nodes=(0, 1, 2))
    engine = PlacementEngine(topology)
    assert 0 not in topology.rail_aligned_nodes and 3 in topology.rail_aligned_nodes

    strict = engine.preview(Request(nodes=4, rail_aligned=True))
    preferred = engine.preview(Request(nodes=4))
    forced = engine.preview(Request(nodes=31))
    first_fit = PlacementEngine(topology, policy="first-fit").preview(Request(nodes=4))

    assert isinstance(strict, Placement) and strict.rail_aligned
    assert not set(strict.node_ids) & {0, 1, 2}
    assert isinstance(preferred, Placement) and preferred.rail_aligned
    assert isinstance(forced, Placement) and not forced.rail_aligned
    assert isinstance(first_fit, Placement) and not first_fit.rail_aligned
    too_many = engine.preview(Request(nodes=30, rail_aligned=True))
    assert isinstance(too_many, Rejection) and "29 eligible nodes" in too_many.message


def test_sub_node_share_best_fits_into_a_partly_used_node():
    engine = PlacementEngine(rail_optimized(1))
    engine.state.book("six", TENANT, ((5, 0b00111111),), 0.0, 100.0)

    result = engine.preview(Request(gpus=2))

    assert isinstance(result, Placement)
    assert result.node_ids == (5,)
    assert result.gpu_indices == ((6, 7),)
    assert result.leaves == (6, 7)  # GPU i uses rail i's leaf


def test_sub_node_shares_never_overlap_on_a_gpu():
    engine = PlacementEngine(rail_optimized(1, nodes_per_su=1))
    for i in range(4):
        assert isinstance(engine.place(Request(gpus=2), f"s{i}"), Placement)
    fifth = engine.place(Request(gpus=2), "s4")

    assert isinstance(fifth, Rejection)
    assert "2 GPUs on one node requested; the most free GPUs on one node is 0" in fifth.message
    assert overlapping_pairs(engine) == []


def test_a_future_booking_blocks_now_requests_that_run_into_it_half_open():
    engine = PlacementEngine(rail_optimized(2))
    occupy(engine, range(32), start=100.0, end=200.0, booking_id="later")

    into_it = engine.preview(Request(nodes=16, end=150.0))
    before_it = engine.preview(Request(nodes=16, end=100.0))

    assert isinstance(into_it, Placement) and into_it.leaf_groups == (1,)
    assert isinstance(before_it, Placement) and before_it.leaf_groups == (0,)


def test_future_window_uses_interval_checks():
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, range(24), end=50.0)

    busy_window = engine.preview(Request(nodes=16, start=10.0, end=60.0))
    later_window = engine.preview(Request(nodes=16, start=50.0, end=60.0))

    assert isinstance(busy_window, Rejection)
    assert isinstance(later_window, Placement) and later_window.start == 50.0


def test_earliest_window_is_the_first_end_that_frees_enough():
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, range(0, 10), end=300.0, booking_id="a")
    occupy(engine, range(10, 20), end=400.0, booking_id="b")
    occupy(engine, range(20, 32), end=500.0, booking_id="c")

    assert engine.earliest_window(Request(nodes=8, end=100.0)).start == 300.0
    assert engine.earliest_window(Request(nodes=16, end=100.0)).start == 400.0
    assert engine.earliest_window(Request(nodes=32, end=100.0)).start == 500.0
    assert engine.earliest_window(Request(nodes=32, end=100.0), horizon=450.0) is None


def test_earliest_window_respects_later_bookings():
    # Free now for 100 s only, then busy [100, 1000): a 200 s job must wait until 1000.
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, range(32), start=100.0, end=1000.0)

    result = engine.earliest_window(Request(nodes=4, end=200.0))

    assert result is not None and result.start == 1000.0 and result.end == 1200.0


def test_unavailable_nodes_are_never_placed():
    engine = PlacementEngine(rail_optimized(1))
    for node in range(10):
        engine.set_node_state(node, NodeState.DRAINING if node % 2 else NodeState.DOWN)

    result = engine.preview(Request(nodes=22))
    too_many = engine.preview(Request(nodes=23))

    assert isinstance(result, Placement) and min(result.node_ids) == 10
    assert isinstance(too_many, Rejection)


def test_direct_double_booking_is_refused():
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, [3], start=0.0, end=100.0, booking_id="a")

    with pytest.raises(BookingConflict, match="overlaps a"):
        engine.state.book("b", TENANT, ((3, 1),), 99.0, 200.0)
    engine.state.book("c", TENANT, ((3, 1),), 100.0, 200.0)  # half-open: touching is fine

    assert overlapping_pairs(engine) == []


def test_release_and_expiry_free_capacity():
    engine = PlacementEngine(rail_optimized(1))
    engine.place(Request(nodes=32, end=100.0), "all")
    assert isinstance(engine.preview(Request(nodes=1, end=50.0)), Rejection)

    ended = engine.advance(100.0)

    assert [b.id for b in ended] == ["all"]
    assert isinstance(engine.preview(Request(nodes=32, end=150.0)), Placement)
    engine.state.check_invariants()


def test_three_level_tree_prefers_one_pod_and_hop_limit_is_enforced():
    # 2 pods x 2 leaves x 4 nodes; pod 0 has 1 free node on leaf 0 and 4 on leaf 1.
    topology = fat_tree(16, nodes_per_leaf=4, leaves_per_pod=2)
    engine = PlacementEngine(topology)
    occupy(engine, [0, 1, 2])

    in_pod = engine.preview(Request(nodes=5))
    crossing = engine.preview(Request(nodes=9, max_switch_hops=2))
    anywhere = engine.preview(Request(nodes=9))

    assert isinstance(in_pod, Placement) and in_pod.max_hops == 2
    assert {topology.groups[g].pod for g in in_pod.leaf_groups} == {0}
    assert isinstance(crossing, Rejection) and crossing.reason is RejectReason.MAX_HOPS
    assert "the largest free pod has 8" in crossing.message
    assert isinstance(anywhere, Placement) and anywhere.max_hops == 4
    assert not anywhere.rail_aligned  # one HCA for 8 GPUs is never rail-aligned


def test_fragmentation_is_zero_when_free_capacity_is_concentrated():
    engine = PlacementEngine(rail_optimized(2))
    assert engine.fragmentation() == 0.0
    occupy(engine, range(0, 64, 2))  # every other node busy: no whole group left
    assert engine.fragmentation() == pytest.approx(1 - 16 / 32)
