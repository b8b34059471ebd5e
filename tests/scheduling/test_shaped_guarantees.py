"""Topology-shaped guarantees ("N whole leaf groups") kept placeable by placement.

Pure engine tests on 4 leaf groups of 4 nodes (8 GPUs each), a hypothesis state machine checking
the invariant against a recomputation from the bookings, then the reservation service on
PostgreSQL (the 16-node fat tree of conftest: 4 leaves of 4 nodes).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from console.tenancy.errors import Invalid
from scheduling.models import Reservation
from scheduling.placement import (
    Owner,
    Placement,
    PlacementEngine,
    Rejection,
    RejectReason,
    Request,
    ShapedGuarantees,
    rail_optimized,
    reclaim_plan,
)
from scheduling.services import lifecycle, quotas, reservations
from tests.scheduling.conftest import OPERATOR, SYSTEM, give_quota, request_for, tenant_principal
from tests.scheduling.sched_helpers import occupy, overlapping_pairs

TOPO = rail_optimized(4, nodes_per_su=4)  # leaf group g holds nodes 4g .. 4g+3
OTHER = Owner("other")
LENDER = Owner("lender", borrowed=True)


def group_claim(engine: PlacementEngine, tenant: str, groups: int = 1, end: float = 1e6):
    """What the services do for a guaranteed request of whole leaf groups: reclaim if needed."""
    request = Request(nodes=4 * groups, same_leaf=groups == 1, end=end, owner=Owner(tenant))
    return reclaim_plan(engine, request)


def slack(engine: PlacementEngine) -> int:
    """universal - sum(deficits), recomputed from the bookings alone."""
    state = engine.state
    universal = 0
    guarantees = next(g for g in engine.guards if isinstance(g, ShapedGuarantees)).guarantees
    dedicated = dict.fromkeys(guarantees, 0)
    for group in engine.topology.groups:
        tenants = {
            b.owner.tenant
            for b in state.bookings.values()
            if not b.owner.borrowed and any(state.node_group[n] == group.id for n in b.node_ids)
        }
        if not tenants:
            universal += 1
        elif len(tenants) == 1 and (only := tenants.pop()) in dedicated:
            dedicated[only] += 1
    return universal - sum(max(0, n - dedicated[t]) for t, n in guarantees.items())


# ---------------------------------------------------------------- the guard


def _stream(engine: PlacementEngine, seed: int):
    """Another tenant's stream of small non-borrowed jobs (shares, one and two nodes) arriving,
    ending and being released; yields after every step."""
    rng = random.Random(seed)
    for step in range(80):
        live = sorted(b for b in engine.state.bookings if b.startswith("o"))
        if live and rng.random() < 0.3:
            engine.release(rng.choice(live))
        else:
            start = engine.now + rng.choice([0, 0, 0, 5, 20])
            gpus = rng.choice([2, 4, 8, 8, 16])
            request = Request(gpus=gpus, start=start, end=start + rng.randint(5, 60), owner=OTHER)
            engine.place(request, f"o{step}", explain=False)
        if rng.random() < 0.2:
            engine.advance(engine.now + rng.randint(1, 10))
        yield


@pytest.mark.parametrize("seed", range(6))
def test_a_shaped_guarantee_stays_placeable_against_a_stream_of_small_jobs(seed):
    engine = PlacementEngine(TOPO, guards=[ShapedGuarantees({"shaped": 1})])
    for _ in _stream(engine, seed):
        for end in (engine.now + 10, engine.now + 1e5):  # short and long claims alike
            claim = group_claim(engine, "shaped", end=end)
            assert isinstance(claim, Placement), claim.message
        assert slack(engine) >= 0
    engine.state.check_invariants()


def test_without_the_guard_the_same_streams_break_the_guarantee():
    # The stream above is a real threat: unguarded, it leaves no whole leaf group for some seed.
    broken = 0
    for seed in range(6):
        engine = PlacementEngine(TOPO)
        for _ in _stream(engine, seed):
            if not isinstance(group_claim(engine, "shaped"), Placement):
                broken += 1
                break
    assert broken >= 3


def test_costly_group_fallback_chooses_cost_free_groups():
    # Groups 0 and 1 are the other tenant's (1 and 2 free nodes); 2 and 3 are universal, group 2
    # with one borrowed node. Best fit alone would put 3 nodes in group 2 (3 free).
    engine = PlacementEngine(TOPO, guards=[ShapedGuarantees({"shaped": 2})])
    occupy(engine, [0, 1, 2], booking_id="o-0", owner=OTHER)
    occupy(engine, [4, 5], booking_id="o-1", owner=OTHER)
    occupy(engine, [8], booking_id="lent", owner=LENDER)
    unguarded = PlacementEngine(TOPO, state=engine.state)
    assert unguarded.preview(Request(nodes=3, owner=OTHER)).leaf_groups == (2,)

    result = engine.place(Request(nodes=3, owner=OTHER), "o-2")

    assert isinstance(result, Placement)
    assert result.leaf_groups == (0, 1)
    claim = group_claim(engine, "shaped", groups=2)
    assert isinstance(claim, Placement) and claim.leaf_groups == (2, 3)
    assert claim.preempts == ("lent",)


def test_among_equally_good_placements_the_cost_free_one_wins():
    # Group 0 universal (2 nodes lent out), group 1 the other tenant's (2 free): both hold a
    # 2-node gang in one group; best fit picks group 0, the guard prefers group 1 (slack left).
    engine = PlacementEngine(TOPO, guards=[ShapedGuarantees({"shaped": 1})])
    occupy(engine, [0, 1], booking_id="lent", owner=LENDER)
    occupy(engine, [4, 5], booking_id="o-1", owner=OTHER)
    unguarded = PlacementEngine(TOPO, state=engine.state)
    assert unguarded.preview(Request(nodes=2, owner=OTHER)).leaf_groups == (0,)

    result = engine.preview(Request(nodes=2, owner=OTHER))

    assert isinstance(result, Placement) and result.leaf_groups == (1,)


def test_spare_slack_may_be_spent_when_nothing_cost_free_fits():
    # 2 universal groups, 1 needed: a 4-node gang may take one universal group.
    engine = PlacementEngine(TOPO, guards=[ShapedGuarantees({"shaped": 1})])
    occupy(engine, [0, 1, 2, 3, 4, 5, 6], booking_id="o-0", owner=OTHER)

    first = engine.place(Request(nodes=4, owner=OTHER), "o-1")
    second = engine.preview(Request(nodes=4, owner=OTHER))

    assert isinstance(first, Placement) and first.leaf_groups in {(2,), (3,)}
    assert isinstance(second, Rejection) and second.reason is RejectReason.GUARANTEE


def test_the_rejection_explains_itself_and_names_no_tenant():
    engine = PlacementEngine(TOPO, guards=[ShapedGuarantees({"acme-secret": 2})])
    occupy(engine, range(0, 8), end=100.0, booking_id="o-0", owner=OTHER)

    result = engine.preview(Request(nodes=2, end=50.0, owner=OTHER))

    assert isinstance(result, Rejection)
    assert result.reason is RejectReason.GUARANTEE
    assert result.message.startswith(
        "2 nodes (16 GPUs) requested; the free leaf groups are held for other tenants' "
        "guaranteed leaf groups (2 held); 0 nodes fit outside them; earliest window with 2 is "
    )
    assert result.details["held_leaf_groups"] == 2
    assert result.details["earliest_start"] == 100.0  # then groups 0-1 are free, and not held
    assert "acme" not in result.message and "acme" not in repr(result.details)


def test_borrowed_placements_are_not_restricted_and_are_reclaimed_for_the_guarantee():
    engine = PlacementEngine(TOPO, guards=[ShapedGuarantees({"shaped": 2})])
    occupy(engine, range(0, 8), booking_id="o-0", owner=OTHER)
    borrowed = Owner("other", borrowed=True)

    result = engine.place(Request(nodes=6, owner=borrowed), "o-borrowed")

    assert isinstance(result, Placement) and result.leaf_groups == (2, 3)
    claim = group_claim(engine, "shaped", groups=2)
    assert isinstance(claim, Placement) and claim.preempts == ("o-borrowed",)


def test_shares_of_a_node_prefer_groups_that_cost_nothing():
    # Node 0 (the other tenant's group) has 4 free GPUs; node 4 (universal, lent out) has 2:
    # best fit alone takes node 4.
    engine = PlacementEngine(TOPO, guards=[ShapedGuarantees({"shaped": 1})])
    engine.state.book("o-0", OTHER, ((0, 0x0F),), 0.0, 1e12)
    engine.state.book("lent", LENDER, ((4, 0x3F),), 0.0, 1e12)
    unguarded = PlacementEngine(TOPO, state=engine.state)
    assert unguarded.preview(Request(gpus=2, owner=OTHER)).node_ids == (4,)

    result = engine.preview(Request(gpus=2, owner=OTHER))

    assert isinstance(result, Placement) and result.node_ids == (0,)


def test_shares_are_refused_when_only_held_groups_have_room():
    engine = PlacementEngine(TOPO, guards=[ShapedGuarantees({"shaped": 3})])
    occupy(engine, range(0, 4), booking_id="o-0", owner=OTHER)

    result = engine.preview(Request(gpus=2, owner=OTHER))

    assert isinstance(result, Rejection) and result.reason is RejectReason.GUARANTEE
    assert "2 GPUs on one node requested; the free leaf groups are held" in result.message
    assert "the most free GPUs on one node outside them is 0" in result.message


def test_a_shaped_tenant_takes_no_more_universal_groups_than_it_still_needs():
    engine = PlacementEngine(TOPO, guards=[ShapedGuarantees({"s": 1, "t": 1})])
    occupy(engine, range(0, 8), booking_id="o-0", owner=OTHER)

    two_groups = engine.preview(Request(nodes=8, owner=Owner("s")))
    one_group = engine.place(Request(nodes=4, owner=Owner("s")), "s-1")
    after = engine.preview(Request(nodes=1, owner=Owner("s")))

    assert isinstance(two_groups, Rejection) and two_groups.reason is RejectReason.GUARANTEE
    assert isinstance(one_group, Placement)
    assert isinstance(after, Rejection)  # its group is full; the last one is t's
    assert isinstance(group_claim(engine, "t"), Placement)


def test_the_guarantee_holds_for_any_window_not_just_each_request_window():
    # Checked window by window, "group 0 over [50, 100)" then "group 1 over [0, 50)" (best fit:
    # a node of group 1 is lent out) each leave three universal groups in their own window, yet
    # afterwards only two groups are whole over [0, 100). The guard counts every non-borrowed
    # booking from now on, so the second job goes where the first one already is.
    engine = PlacementEngine(TOPO, guards=[ShapedGuarantees({"shaped": 3})])
    occupy(engine, [4], booking_id="lent", owner=LENDER)
    first = engine.place(Request(nodes=4, start=50.0, end=100.0, owner=OTHER), "o-1")
    second = engine.place(Request(nodes=3, start=0.0, end=50.0, owner=OTHER), "o-2")

    assert isinstance(first, Placement) and first.leaf_groups == (0,)
    assert isinstance(second, Placement) and second.leaf_groups == (0,)
    claim = group_claim(engine, "shaped", groups=3, end=100.0)
    assert isinstance(claim, Placement) and claim.preempts == ("lent",)


def test_an_over_committed_pool_is_never_made_worse():
    # The guarantee was set while every group was in use (bookings made directly).
    engine = PlacementEngine(TOPO, guards=[ShapedGuarantees({"shaped": 1})])
    for group in range(4):
        occupy(engine, [4 * group], booking_id=f"o-{group}", owner=OTHER)
    assert slack(engine) == -1

    into_used = engine.place(Request(nodes=3, owner=OTHER), "o-more")
    engine.release("o-3")
    into_freed = engine.preview(Request(nodes=4, same_leaf=True, owner=OTHER))
    spread = engine.preview(Request(nodes=4, owner=OTHER))

    assert isinstance(into_used, Placement)  # a group already dead costs nothing
    assert isinstance(into_freed, Rejection) and into_freed.reason is RejectReason.GUARANTEE
    assert isinstance(spread, Placement) and 3 not in spread.leaf_groups
    assert isinstance(group_claim(engine, "shaped"), Placement)


def test_without_guarantees_or_for_anonymous_requests_nothing_changes():
    plain = PlacementEngine(TOPO)
    occupy(plain, [0, 1], booking_id="lent", owner=LENDER)
    assert plain.preview(Request(nodes=2)).leaf_groups == (0,)
    guarded = PlacementEngine(TOPO, guards=[ShapedGuarantees({"shaped": 4})], state=plain.state)
    anonymous = guarded.preview(Request(nodes=2))  # owner None: an anonymous, non-borrowed ask
    assert isinstance(anonymous, Rejection) and anonymous.reason is RejectReason.GUARANTEE


# ---------------------------------------------------------------- state machine

MACHINE_TOPO = rail_optimized(4, nodes_per_su=4, gpus_per_node=4, rails=4)
SHAPED = {"s1": 1, "s2": 2}


class GuaranteeMachine(RuleBasedStateMachine):
    """Random placements (shaped and unshaped tenants, borrowed or not, now or later), claims of
    whole groups, releases and time; the shaped guarantees must stay placeable throughout."""

    def __init__(self) -> None:
        super().__init__()
        self.engine = PlacementEngine(MACHINE_TOPO, guards=[ShapedGuarantees(SHAPED)])
        self.serial = 0

    def _id(self) -> str:
        self.serial += 1
        return f"b{self.serial}"

    @rule(
        tenant=st.sampled_from(["s1", "s2", "t1", "t2"]),
        borrowed=st.booleans(),
        gpus=st.integers(1, 24),
        offset=st.integers(0, 20),
        length=st.integers(1, 40),
        same_leaf=st.booleans(),
    )
    def place(self, tenant, borrowed, gpus, offset, length, same_leaf):
        # Shaped tenants stay within their guarantee here (a borrowing owner would block itself).
        owner = Owner(tenant, borrowed and tenant.startswith("t"))
        start = self.engine.now + offset
        request = Request(gpus=gpus, start=start, end=start + length, same_leaf=same_leaf, owner=owner)
        self.engine.place(request, self._id(), explain=False)

    @rule(tenant=st.sampled_from(sorted(SHAPED)), length=st.integers(1, 60))
    def claim_a_group(self, tenant, length):
        result = group_claim(self.engine, tenant, end=self.engine.now + length)
        if isinstance(result, Placement):
            for victim in result.preempts:
                assert self.engine.state.bookings[victim].owner.borrowed
                self.engine.release(victim)
            self.engine.book(self._id(), result, Owner(tenant))

    @precondition(lambda self: self.engine.state.bookings)
    @rule(data=st.data())
    def release(self, data):
        self.engine.release(data.draw(st.sampled_from(sorted(self.engine.state.bookings))))

    @rule(step=st.integers(0, 25))
    def advance(self, step):
        self.engine.advance(self.engine.now + step)

    @invariant()
    def guarantees_are_placeable(self):
        assert slack(self.engine) >= 0
        assert overlapping_pairs(self.engine) == []
        self.engine.state.check_invariants()

    @invariant()
    def a_shaped_tenant_short_of_its_groups_can_claim_one_via_reclaim(self):
        state = self.engine.state
        for tenant, needed in SHAPED.items():
            whole = {
                g.id
                for g in MACHINE_TOPO.groups
                if {b.owner.tenant for b in state.bookings.values() if not b.owner.borrowed and g.id in b.groups}
                == {tenant}
            }
            if len(whole) < needed:
                claim = group_claim(self.engine, tenant, end=self.engine.now + 1000)
                assert isinstance(claim, Placement), claim.message


GuaranteeMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=30, deadline=None)
TestGuaranteeMachine = GuaranteeMachine.TestCase


# ---------------------------------------------------------------- the reservation service


def _reserve(tenant, pool, **kw) -> Reservation:
    return reservations.reserve(SYSTEM, tenant_principal(tenant), request_for(pool, **kw))


def _shape(tenant, pool, gpus: int, groups: int, borrow: int = 0):
    return quotas.set_quota(
        SYSTEM,
        OPERATOR,
        tenant=tenant,
        pool=pool,
        guaranteed_gpus=gpus,
        borrow_limit_gpus=borrow,
        guaranteed_leaf_groups=groups,
    )


@pytest.mark.django_db
def test_a_shaped_tenant_gets_its_whole_leaf_group_after_another_filled_the_rest(pool, tenant_a, tenant_b):
    _shape(tenant_a, pool, 32, 1)
    give_quota(tenant_b, pool, 96)
    jobs = [_reserve(tenant_b, pool, gpus=8) for _ in range(12)]
    assert all(j.status == Reservation.Status.PROVISIONING for j in jobs)
    # B frees one node in each of its three leaves, then asks for 3 nodes: best fit alone would
    # take 3 nodes of the last whole leaf.
    by_leaf = {}
    for job in jobs:
        by_leaf.setdefault(job.placement["leaf_groups"][0], job)
    assert len(by_leaf) == 3
    for job in by_leaf.values():
        lifecycle.release(SYSTEM, tenant_principal(tenant_b), job)

    spread = _reserve(tenant_b, pool, gpus=24)

    assert spread.status == Reservation.Status.PROVISIONING
    assert sorted(spread.placement["leaf_groups"]) == sorted(by_leaf)
    claim = _reserve(tenant_a, pool, gpus=32, same_leaf=True)
    assert claim.status == Reservation.Status.PROVISIONING
    assert claim.placement["leaf_groups"] not in ([leaf] for leaf in by_leaf)


@pytest.mark.django_db
def test_the_service_refuses_the_held_leaf_group_without_naming_its_tenant(pool, tenant_a, tenant_b):
    _shape(tenant_a, pool, 32, 1)
    give_quota(tenant_b, pool, 96)
    jobs = [_reserve(tenant_b, pool, gpus=8) for _ in range(12)]
    for job in (jobs[0], jobs[-1]):  # one node free in the first and in the third leaf
        lifecycle.release(SYSTEM, tenant_principal(tenant_b), job)

    refused = _reserve(tenant_b, pool, gpus=16, same_leaf=True)
    preview = reservations.preview(tenant_principal(tenant_b), request_for(pool, gpus=16, same_leaf=True))

    assert refused.status == Reservation.Status.REJECTED
    assert refused.explanation["reason"] == "guarantee"
    assert "held for other tenants' guaranteed leaf groups (1 held)" in refused.reason
    assert "1 nodes fit under one leaf outside them" in refused.reason
    assert "Tenant A" not in refused.reason and "tenant-a" not in str(refused.explanation)
    assert preview["rejection"]["reason"] == "guarantee"
    # Within the guarantee the shaped tenant gets the whole leaf.
    assert _reserve(tenant_a, pool, gpus=32, same_leaf=True).status == Reservation.Status.PROVISIONING


@pytest.mark.django_db
def test_a_shaped_guarantee_needs_the_guaranteed_gpus_of_its_groups(pool, tenant_a):
    with pytest.raises(Invalid, match="need at least 32 guaranteed GPUs"):
        _shape(tenant_a, pool, 16, 1)
    assert _shape(tenant_a, pool, 32, 1).guaranteed_leaf_groups == 1
