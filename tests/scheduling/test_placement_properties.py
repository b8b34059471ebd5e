"""Property tests: whatever sequence of operations, no GPU is ever held twice at once and the
incremental free counters equal a recomputation from the bookings."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from scheduling.placement import (
    BookingConflict,
    NodeState,
    Owner,
    Placement,
    PlacementEngine,
    Policy,
    Request,
    rail_optimized,
)
from tests.scheduling.sched_helpers import overlapping_pairs

TOPOLOGY = rail_optimized(3, nodes_per_su=4, gpus_per_node=4, rails=4, miswired_nodes=(5,))


class PoolMachine(RuleBasedStateMachine):
    """Random book / place / release / advance / node-state sequences on a 12-node pool."""

    def __init__(self) -> None:
        super().__init__()
        self.engine = PlacementEngine(TOPOLOGY, policy=Policy.TOPOLOGY)
        self.serial = 0

    def _next_id(self) -> str:
        self.serial += 1
        return f"r{self.serial}"

    @rule(
        gpus=st.integers(min_value=1, max_value=40),
        offset=st.integers(min_value=0, max_value=30),
        length=st.integers(min_value=1, max_value=40),
        same_leaf=st.booleans(),
        rail_aligned=st.booleans(),
        first_fit=st.booleans(),
    )
    def place(self, gpus, offset, length, same_leaf, rail_aligned, first_fit):
        self.engine.policy = Policy.FIRST_FIT if first_fit else Policy.TOPOLOGY
        start = self.engine.now + offset
        request = Request(
            gpus=gpus,
            start=start,
            end=start + length,
            same_leaf=same_leaf,
            rail_aligned=rail_aligned,
        )
        before = set(self.engine.state.bookings)
        # The engine must only ever propose free GPUs: a BookingConflict here fails the test.
        result = self.engine.place(request, self._next_id(), Owner("t"), explain=False)
        if isinstance(result, Placement):
            assert result.gpus == (gpus if gpus <= 4 else -(-gpus // 4) * 4)
            assert all(self.engine.state.node_state[n] is NodeState.AVAILABLE for n in result.node_ids)
            if same_leaf:
                assert len(result.leaf_groups) == 1
            if rail_aligned:
                assert result.rail_aligned
        else:
            assert set(self.engine.state.bookings) == before  # all or nothing

    @rule(
        node=st.integers(min_value=0, max_value=11),
        mask=st.integers(min_value=1, max_value=15),
        offset=st.integers(min_value=0, max_value=30),
        length=st.integers(min_value=1, max_value=40),
    )
    def book_directly(self, node, mask, offset, length):
        start = self.engine.now + offset
        try:
            self.engine.state.book(self._next_id(), Owner("t"), ((node, mask),), start, start + length)
        except BookingConflict:
            pass

    @precondition(lambda self: self.engine.state.bookings)
    @rule(data=st.data())
    def release(self, data):
        booking_id = data.draw(st.sampled_from(sorted(self.engine.state.bookings)))
        self.engine.release(booking_id)

    @precondition(lambda self: self.engine.state.bookings)
    @rule(data=st.data(), extra=st.integers(min_value=-10, max_value=20))
    def extend(self, data, extra):
        booking_id = data.draw(st.sampled_from(sorted(self.engine.state.bookings)))
        booking = self.engine.state.bookings[booking_id]
        try:
            self.engine.state.extend(booking_id, booking.end + extra)
        except (BookingConflict, ValueError):
            pass

    @rule(step=st.integers(min_value=0, max_value=25))
    def advance(self, step):
        self.engine.advance(self.engine.now + step)

    @rule(node=st.integers(min_value=0, max_value=11), state=st.sampled_from(list(NodeState)))
    def set_state(self, node, state):
        self.engine.set_node_state(node, state)

    @invariant()
    def no_gpu_is_held_twice(self):
        assert overlapping_pairs(self.engine) == []

    @invariant()
    def counters_match_a_recomputation(self):
        state = self.engine.state
        now = state.now
        for group in TOPOLOGY.groups:
            free_nodes = free_gpus = 0
            for node in group.nodes:
                if state.node_state[node] is not NodeState.AVAILABLE:
                    continue
                busy = 0
                for booking in state.bookings.values():
                    if booking.start <= now < booking.end:
                        busy |= dict(booking.allocations).get(node, 0)
                free_nodes += busy == 0
                free_gpus += 4 - bin(busy).count("1")
            assert state.group_free_nodes[group.id] == free_nodes
            assert state.group_free_gpus[group.id] == free_gpus
        state.check_invariants()


PoolMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestPoolMachine = PoolMachine.TestCase


@settings(max_examples=60, deadline=None)
@given(
    bookings=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=11),
            st.integers(min_value=1, max_value=15),
            st.integers(min_value=0, max_value=60),
            st.integers(min_value=1, max_value=60),
        ),
        max_size=25,
    ),
    gpus=st.integers(min_value=1, max_value=40),
    length=st.integers(min_value=1, max_value=50),
    same_leaf=st.booleans(),
)
def test_earliest_window_matches_a_brute_force_scan(bookings, gpus, length, same_leaf):
    engine = PlacementEngine(TOPOLOGY)
    for i, (node, mask, start, duration) in enumerate(bookings):
        try:
            engine.state.book(f"b{i}", Owner("t"), ((node, mask),), start, start + duration)
        except BookingConflict:
            pass
    request = Request(gpus=gpus, end=float(length), same_leaf=same_leaf)

    found = engine.earliest_window(request)

    # Every start the engine could pick is 0 or a booking end; scan them all in order.
    starts = sorted({0.0, *(b.end for b in engine.state.bookings.values())})
    expected = next(
        (t for t in starts if isinstance(engine.search(request, t, t + length, explain=False), Placement)),
        None,
    )
    assert (found.start if found else None) == expected
