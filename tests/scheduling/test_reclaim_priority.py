"""Reclaim takes lower priority classes first: best-effort (rank 0) < training (1) < inference (2).

A rank is touched only when all lower ranks together cannot free the capacity; within a rank the
former rule holds (fewest bookings, then fewest GPUs). Pure engine tests on one 32-node SU, a
brute-force property, then the reservation service on PostgreSQL.
"""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.models import Reservation
from scheduling.placement import (
    Owner,
    Placement,
    PlacementEngine,
    Rejection,
    Request,
    rail_optimized,
    reclaim_plan,
)
from scheduling.services import reservations
from tests.scheduling.conftest import SYSTEM, give_quota, request_for, tenant_principal
from tests.scheduling.sched_helpers import occupy

BEST_EFFORT, TRAINING, INFERENCE = 0, 1, 2


def lent(rank: int) -> Owner:
    return Owner("beta", borrowed=True, priority=rank)


def claim(engine: PlacementEngine, nodes: int) -> Placement | Rejection:
    return reclaim_plan(engine, Request(nodes=nodes, owner=Owner("alpha")))


def test_best_effort_goes_before_training_even_when_it_is_larger():
    engine = PlacementEngine(rail_optimized(1))  # 8 nodes free
    occupy(engine, range(8, 16), booking_id="training", owner=lent(TRAINING))
    occupy(engine, range(16, 32), booking_id="best-effort", owner=lent(BEST_EFFORT))

    result = claim(engine, 16)

    assert isinstance(result, Placement) and result.preempts == ("best-effort",)


def test_with_equal_ranks_the_smaller_booking_goes():
    # The same pool with one rank: the former rule (fewest GPUs) picks the training booking.
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, range(8, 16), booking_id="training", owner=lent(TRAINING))
    occupy(engine, range(16, 32), booking_id="best-effort", owner=lent(TRAINING))

    result = claim(engine, 16)

    assert isinstance(result, Placement) and result.preempts == ("training",)


def test_training_goes_only_when_best_effort_cannot_free_enough():
    engine = PlacementEngine(rail_optimized(1))  # nodes 0-7 free
    occupy(engine, range(8, 16), booking_id="training", owner=lent(TRAINING))
    occupy(engine, range(16, 20), booking_id="best-effort", owner=lent(BEST_EFFORT))
    occupy(engine, range(20, 32), booking_id="own", owner=Owner("beta"))  # not borrowed

    enough = claim(engine, 12)
    more = claim(engine, 16)

    assert isinstance(enough, Placement) and enough.preempts == ("best-effort",)
    # best-effort alone frees 12 of 16: training must go, and then best-effort is not needed.
    assert isinstance(more, Placement) and more.preempts == ("training",)


def test_two_best_effort_bookings_go_before_one_training_booking():
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, range(8, 16), booking_id="training", owner=lent(TRAINING))
    occupy(engine, range(16, 20), booking_id="be-1", owner=lent(BEST_EFFORT))
    occupy(engine, range(20, 24), booking_id="be-2", owner=lent(BEST_EFFORT))
    occupy(engine, range(24, 32), booking_id="own", owner=Owner("beta"))

    result = claim(engine, 16)

    assert isinstance(result, Placement) and result.preempts == ("be-1", "be-2")


def test_inference_is_the_last_to_go():
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, range(8, 16), booking_id="inference", owner=lent(INFERENCE))
    occupy(engine, range(16, 32), booking_id="training", owner=lent(TRAINING))

    result = claim(engine, 16)

    assert isinstance(result, Placement) and result.preempts == ("training",)


def test_a_priority_bound_still_spares_higher_ranks():
    engine = PlacementEngine(rail_optimized(1))
    occupy(engine, range(0, 32), booking_id="inference", owner=lent(INFERENCE))

    bounded = reclaim_plan(engine, Request(nodes=4), tenant="alpha", priority=TRAINING)
    unbounded = reclaim_plan(engine, Request(nodes=4), tenant="alpha")

    assert isinstance(bounded, Rejection)
    assert isinstance(unbounded, Placement) and unbounded.preempts == ("inference",)


@settings(max_examples=60, deadline=None)
@given(
    bookings=st.lists(st.tuples(st.integers(1, 5), st.integers(BEST_EFFORT, INFERENCE)), min_size=1, max_size=6),
    needed=st.integers(1, 16),
    same_leaf=st.booleans(),
)
def test_the_highest_rank_preempted_is_the_lowest_possible_and_none_is_spare(bookings, needed, same_leaf):
    # 2 SUs of 8 nodes filled in node order by borrowers of the given sizes and ranks.
    engine = PlacementEngine(rail_optimized(2, nodes_per_su=8))
    node, rank_of = 0, {}
    for i, (size, rank) in enumerate(bookings):
        nodes = list(range(node, min(node + size, 16)))
        if not nodes:
            break
        occupy(engine, nodes, booking_id=f"b{i}", owner=lent(rank))
        rank_of[f"b{i}"] = rank
        node += size
    request = Request(nodes=needed, same_leaf=same_leaf, owner=Owner("alpha"))

    result = reclaim_plan(engine, request)

    def fits_without(ids) -> bool:
        trial = engine.search(request, 0.0, request.end, explain=False, ignore=frozenset(ids))
        return isinstance(trial, Placement)

    feasible = [set(c) for k in range(len(rank_of) + 1) for c in combinations(rank_of, k) if fits_without(c)]
    if not feasible:
        assert isinstance(result, Rejection)
        return
    assert isinstance(result, Placement) and fits_without(result.preempts)
    top = max((rank_of[b] for b in result.preempts), default=-1)
    lowest_top = min(max((rank_of[b] for b in f), default=-1) for f in feasible)
    assert top == lowest_top
    # Fewest bookings of the highest rank needed (every lower one being available).
    fewest_top = min(sum(1 for b in f if rank_of[b] == top) for f in feasible if all(rank_of[b] <= top for b in f))
    assert sum(1 for b in result.preempts if rank_of[b] == top) == fewest_top
    for victim in result.preempts:  # irreducible
        assert not fits_without(set(result.preempts) - {victim})


# ---------------------------------------------------------------- the reservation service


@pytest.mark.django_db
def test_a_borrowed_best_effort_reservation_is_preempted_before_a_borrowed_training_one(pool, tenant_a, tenant_b):
    give_quota(tenant_a, pool, 64, borrow=64)
    give_quota(tenant_b, pool, 64)

    def reserve(tenant, **kw) -> Reservation:
        return reservations.reserve(SYSTEM, tenant_principal(tenant), request_for(pool, **kw))

    # A: its guarantee on leaves 1-2, then borrows a whole leaf (best-effort, 32 GPUs) and half
    # a leaf (training, 16 GPUs). 2 nodes stay free.
    reserve(tenant_a, gpus=64)
    best_effort = reserve(tenant_a, gpus=32, priority_class="best-effort")
    training = reserve(tenant_a, gpus=16, priority_class="training")
    assert best_effort.borrowed and training.borrowed
    assert best_effort.placement["leaf_groups"] != training.placement["leaf_groups"]

    # B claims 4 nodes of its guarantee: freeing either borrowed reservation would do, and the
    # training one is the smaller.
    claim = reserve(tenant_b, gpus=32)

    assert claim.status == Reservation.Status.PROVISIONING
    best_effort.refresh_from_db()
    training.refresh_from_db()
    assert best_effort.status == Reservation.Status.PREEMPTED
    assert training.status == Reservation.Status.PROVISIONING
