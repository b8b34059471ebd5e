"""The power planner (scheduling.power.policy): who goes off, who comes on, and why."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scheduling.power.policy import (
    Demands,
    NodePower,
    PowerPolicy,
    PowerState,
    QueuedDemand,
    ReservationWindow,
    plan,
)

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
BOOT = timedelta(minutes=7)
ON, OFF, BOOTING = PowerState.ON, PowerState.OFF, PowerState.POWERING_ON
POLICY = PowerPolicy(idle_after=timedelta(minutes=30), margin=timedelta(minutes=5))


def node(
    name: str,
    state: PowerState = ON,
    *,
    idle_min: float | None = 60,
    busy: bool = False,
    pinned_on: bool = False,
    leaf_group: str | None = None,
) -> NodePower:
    """A node idle for ``idle_min`` minutes (``None``: not idle)."""
    since = None if idle_min is None or state is not ON else NOW - timedelta(minutes=idle_min)
    return NodePower(name, state, BOOT, busy=busy, idle_since=since, pinned_on=pinned_on, leaf_group=leaf_group)


def actions(result: list) -> list[tuple[str, str]]:
    return [(a.node, a.action) for a in result]


def test_a_node_idle_longer_than_t_goes_off_one_idle_shorter_stays_on():
    nodes = [node("n1", idle_min=45), node("n2", idle_min=29)]

    result = plan(POLICY, nodes, Demands(), NOW)

    assert actions(result) == [("n1", "off")]
    assert result[0].reason == (
        "idle for 45 min (policy: off after 30 min); no reservation needs it before 2026-12-02 12:12 UTC "
        "(boot 7 min + margin 5 min); 0 node(s) wanted by 0 queued request(s) before 2026-12-02 12:12 UTC "
        "plus a warm buffer of 0, and 2 idle node(s) are on"
    )


def test_long_idle_times_read_in_hours_and_minutes():
    nodes = [node("n1", idle_min=180.002), node("n2", idle_min=125), node("n3", idle_min=29.97)]

    result = plan(replace(POLICY, idle_after=timedelta(minutes=29.5)), nodes, Demands(), NOW)

    assert [r.reason.split(";")[0] for r in result] == [
        "idle for 3 h (policy: off after 29.5 min)",
        "idle for 2 h 5 min (policy: off after 29.5 min)",
        "idle for 30 min (policy: off after 29.5 min)",
    ]


def test_busy_and_pinned_nodes_are_never_powered_off():
    nodes = [node("busy", idle_min=None, busy=True), node("pinned", pinned_on=True), node("free")]

    assert actions(plan(POLICY, nodes, Demands(), NOW)) == [("free", "off")]


def test_a_reservation_within_boot_plus_margin_keeps_its_node_on():
    # Boot 7 min + margin 5 min = 12 min: a reservation at +11 min keeps n1; one at +13 min does not.
    nodes = [node("n1"), node("n2")]
    demands = Demands(
        reservations=(
            ReservationWindow("n1", NOW + timedelta(minutes=11), NOW + timedelta(hours=2)),
            ReservationWindow("n2", NOW + timedelta(minutes=13), NOW + timedelta(hours=2)),
        )
    )

    assert actions(plan(POLICY, nodes, demands, NOW)) == [("n2", "off")]


def test_an_off_node_is_powered_on_exactly_boot_plus_margin_before_its_reservation():
    start = NOW + timedelta(minutes=12)
    demands = Demands(reservations=(ReservationWindow("n1", start, start + timedelta(hours=1)),))
    off = [node("n1", OFF)]

    at_time = plan(POLICY, off, demands, NOW)
    one_minute_early = plan(POLICY, off, demands, NOW - timedelta(minutes=1))

    assert actions(at_time) == [("n1", "on")]
    assert at_time[0].reason == ("reservation starts 2026-12-02 12:12 UTC: boot takes 7 min plus a margin of 5 min")
    assert one_minute_early == []


def test_a_finished_reservation_does_not_wake_a_node():
    demands = Demands(reservations=(ReservationWindow("n1", NOW - timedelta(hours=2), NOW),))

    assert plan(POLICY, [node("n1", OFF)], demands, NOW) == []


def test_warm_buffer_is_n_nodes_or_p_percent_whichever_is_larger():
    assert PowerPolicy(buffer_nodes=2, buffer_percent=5).buffer_for(100) == 5
    assert PowerPolicy(buffer_nodes=2, buffer_percent=5).buffer_for(20) == 2
    assert PowerPolicy(buffer_percent=2).buffer_for(256) == 6  # 5.12 rounds up
    assert PowerPolicy(buffer_percent=10).buffer_for(30) == 3  # exactly 3, not 4
    assert PowerPolicy(buffer_nodes=9).buffer_for(4) == 4


def test_the_buffer_keeps_the_longest_idle_nodes_off_first_and_leaves_n_warm():
    policy = PowerPolicy(idle_after=timedelta(minutes=30), buffer_nodes=2)
    nodes = [node("a", idle_min=40), node("b", idle_min=90), node("c", idle_min=60), node("d", idle_min=35)]

    # 4 warm, buffer 2: the two idle longest (b 90 min, c 60 min) go off.
    assert actions(plan(policy, nodes, Demands(), NOW)) == [("b", "off"), ("c", "off")]


def test_the_buffer_is_restored_by_powering_nodes_on():
    policy = PowerPolicy(buffer_nodes=2)
    nodes = [node("a", idle_min=None, busy=True), node("b", OFF), node("c", OFF), node("d", OFF)]

    result = plan(policy, nodes, Demands(), NOW)

    assert actions(result) == [("b", "on"), ("c", "on")]
    assert result[0].reason.endswith("plus a warm buffer of 2; only 0 idle node(s) on")


def test_booting_nodes_count_as_warm():
    policy = PowerPolicy(buffer_nodes=2)
    nodes = [node("a", BOOTING), node("b", BOOTING), node("c", OFF)]

    assert plan(policy, nodes, Demands(), NOW) == []


def test_queued_requests_starting_soon_power_nodes_on_later_ones_do_not():
    nodes = [node("a", idle_min=5), node("b", OFF), node("c", OFF), node("d", OFF)]
    soon = QueuedDemand(NOW + timedelta(minutes=10), nodes=3)
    later = QueuedDemand(NOW + timedelta(hours=3), nodes=3)

    # 3 nodes needed by 12:12, 1 warm: two more come on.
    assert actions(plan(POLICY, nodes, Demands(queued=(soon,)), NOW)) == [("b", "on"), ("c", "on")]
    assert plan(POLICY, nodes, Demands(queued=(later,)), NOW) == []


def test_queued_demand_stops_idle_nodes_going_off():
    nodes = [node("a"), node("b")]
    demand = Demands(queued=(QueuedDemand(NOW, nodes=1),))

    assert actions(plan(POLICY, nodes, demand, NOW)) == [("a", "off")]


def test_pinned_off_node_comes_on():
    result = plan(POLICY, [node("p", OFF, pinned_on=True)], Demands(), NOW)

    assert [(a.node, a.action, a.reason) for a in result] == [("p", "on", "pinned on by the operator")]


def test_failed_and_powering_off_nodes_are_left_alone():
    policy = PowerPolicy(buffer_nodes=2)
    nodes = [node("f", PowerState.FAILED), node("g", PowerState.POWERING_OFF)]

    assert plan(policy, nodes, Demands(), NOW) == []


def test_rate_limit_counts_recent_actions_and_puts_reservations_first():
    unlimited = PowerPolicy(idle_after=timedelta(minutes=30), buffer_nodes=1)
    limited = PowerPolicy(idle_after=timedelta(minutes=30), buffer_nodes=1, max_actions_per_minute=2)
    start = NOW + timedelta(minutes=5)
    nodes = [node("i1"), node("i2"), node("r", OFF)]
    demands = Demands(reservations=(ReservationWindow("r", start, start + timedelta(hours=1)),))
    inside = NOW - timedelta(seconds=30)
    outside = NOW - timedelta(seconds=61)

    # Unlimited: r on for its reservation, and i1 off (2 warm, buffer 1; tie on idle time: by name).
    assert actions(plan(unlimited, nodes, demands, NOW)) == [("r", "on"), ("i1", "off")]
    assert actions(plan(limited, nodes, demands, NOW, [outside, outside])) == [("r", "on"), ("i1", "off")]
    assert actions(plan(limited, nodes, demands, NOW, [inside, outside])) == [("r", "on")]
    assert plan(limited, nodes, demands, NOW, [inside, inside]) == []


def test_dry_run_returns_the_same_actions_marked_as_dry_run():
    nodes = [node("n1"), node("n2", OFF, pinned_on=True)]

    real = plan(POLICY, nodes, Demands(), NOW)
    dry = plan(PowerPolicy(idle_after=POLICY.idle_after, margin=POLICY.margin, dry_run=True), nodes, Demands(), NOW)

    assert [(a.node, a.action, a.reason) for a in dry] == [(a.node, a.action, a.reason) for a in real]
    assert [a.dry_run for a in real] == [False, False]
    assert [a.dry_run for a in dry] == [True, True]


def test_power_off_empties_the_emptiest_leaf_group_first_and_power_on_completes_the_fullest():
    # Group A: a1 busy, a2 idle. Group B: b1, b2 idle. Buffer 1 of 3 warm: two go off, and they
    # are B's (B then is wholly off, A stays whole) although a2 has been idle longest.
    policy = PowerPolicy(idle_after=timedelta(minutes=30), buffer_nodes=1)
    nodes = [
        node("a1", idle_min=None, busy=True, leaf_group="A"),
        node("a2", idle_min=120, leaf_group="A"),
        node("b1", idle_min=60, leaf_group="B"),
        node("b2", idle_min=50, leaf_group="B"),
    ]
    assert actions(plan(policy, nodes, Demands(), NOW)) == [("b1", "off"), ("b2", "off")]

    # Power-on for 1 queued node: from group B, which has a node on, not from the all-off group C.
    nodes = [
        node("b1", idle_min=None, busy=True, leaf_group="B"),
        node("b2", OFF, leaf_group="B"),
        node("c1", OFF, leaf_group="C"),
    ]
    demand = Demands(queued=(QueuedDemand(NOW, nodes=1),))
    assert actions(plan(POLICY, nodes, demand, NOW)) == [("b2", "on")]


def test_the_same_inputs_in_another_order_give_the_same_plan():
    nodes = [node(f"n{i:02d}", idle_min=40 + i % 3) for i in range(12)]
    policy = PowerPolicy(idle_after=timedelta(minutes=30), buffer_nodes=5)

    assert plan(policy, nodes, Demands(), NOW) == plan(policy, list(reversed(nodes)), Demands(), NOW)
    assert len(plan(policy, nodes, Demands(), NOW)) == 7


@pytest.mark.parametrize(
    "kwargs",
    [
        {"idle_after": timedelta(minutes=-1)},
        {"buffer_nodes": -1},
        {"buffer_percent": 101},
        {"max_actions_per_minute": -2},
    ],
)
def test_an_invalid_policy_is_refused(kwargs):
    with pytest.raises(ValueError):
        PowerPolicy(**kwargs)


def test_duplicate_node_names_are_refused():
    with pytest.raises(ValueError, match="unique"):
        plan(POLICY, [node("n1"), node("n1")], Demands(), NOW)
