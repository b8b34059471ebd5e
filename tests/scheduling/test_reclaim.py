"""Reclaiming borrowed capacity: the fewest borrowed bookings give way to a guaranteed request."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.placement import (
    Owner,
    Placement,
    PlacementEngine,
    Rejection,
    Request,
    rail_optimized,
    reclaim_plan,
)
from tests.scheduling.sched_helpers import occupy, overlapping_pairs

BORROWER = Owner(tenant="beta", borrowed=True)
OWNER_OWN = Owner(tenant="alpha")


def test_a_request_that_fits_preempts_nothing():
    engine = PlacementEngine(rail_optimized(1))

    result = reclaim_plan(engine, Request(nodes=8), tenant="alpha")

    assert isinstance(result, Placement) and result.preempts == ()


def test_one_small_borrower_is_enough_and_is_chosen_over_a_large_one():
    # SU0: 8 free, b-small holds 8, b-large holds 16; 16 nodes needed -> only b-small goes.
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, range(8, 16), booking_id="b-small", owner=BORROWER)
    occupy(engine, range(16, 32), booking_id="b-large", owner=BORROWER)

    result = reclaim_plan(engine, Request(nodes=16), tenant="alpha")

    assert isinstance(result, Placement)
    assert result.preempts == ("b-small",)
    assert set(result.node_ids) == set(range(16))
    assert set(engine.state.bookings) == {"b-small", "b-large"}  # nothing changed


def test_guaranteed_and_own_bookings_are_never_preempted():
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, range(0, 16), booking_id="guaranteed", owner=Owner(tenant="beta"))
    occupy(engine, range(16, 24), booking_id="own", owner=Owner(tenant="alpha", borrowed=True))
    occupy(engine, range(24, 32), booking_id="borrowed", owner=BORROWER)

    fits = reclaim_plan(engine, Request(nodes=8), tenant="alpha")
    too_much = reclaim_plan(engine, Request(nodes=16), tenant="alpha")

    assert isinstance(fits, Placement) and fits.preempts == ("borrowed",)
    assert isinstance(too_much, Rejection)


def test_higher_priority_borrowers_are_spared_when_a_priority_is_given():
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, range(32), booking_id="vip", owner=Owner("beta", borrowed=True, priority=9))

    result = reclaim_plan(engine, Request(nodes=4), tenant="alpha", priority=5)

    assert isinstance(result, Rejection)


def test_reclaim_honours_same_leaf():
    # SU0: borrower holds 20, 12 free; SU1: two borrowers of 10 each, 12 free.
    engine = PlacementEngine(rail_optimized(2))
    occupy(engine, range(0, 20), booking_id="su0", owner=BORROWER)
    occupy(engine, range(32, 42), booking_id="su1-a", owner=BORROWER)
    occupy(engine, range(42, 52), booking_id="su1-b", owner=BORROWER)

    result = reclaim_plan(engine, Request(nodes=24, same_leaf=True), tenant="alpha")

    assert isinstance(result, Placement)
    assert len(result.preempts) == 1
    assert len(result.leaf_groups) == 1


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=6),
    st.integers(min_value=1, max_value=16),
    st.booleans(),
)
def test_preemption_set_is_minimal(sizes, needed, same_leaf):
    # 2 SUs of 8 nodes, filled by borrowers of the given sizes, in node order.
    engine = PlacementEngine(rail_optimized(2, nodes_per_su=8))
    node = 0
    booked = []
    for i, size in enumerate(sizes):
        nodes = list(range(node, min(node + size, 16)))
        if not nodes:
            break
        occupy(engine, nodes, booking_id=f"b{i}", owner=BORROWER)
        booked.append(f"b{i}")
        node += size
    request = Request(nodes=needed, same_leaf=same_leaf)

    result = reclaim_plan(engine, request, tenant="alpha")

    def fits_without(ids: tuple[str, ...]) -> bool:
        trial = engine.search(request, 0.0, request.end, explain=False, ignore=frozenset(ids))
        return isinstance(trial, Placement)

    smallest = next(
        (len(c) for k in range(len(booked) + 1) for c in combinations(booked, k) if fits_without(c)),
        None,
    )
    if smallest is None:
        assert isinstance(result, Rejection)
    else:
        assert isinstance(result, Placement)
        assert len(result.preempts) == smallest
        assert fits_without(result.preempts)
    assert overlapping_pairs(engine) == []
