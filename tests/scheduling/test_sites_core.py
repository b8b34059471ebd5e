"""The pure core of multi-site pools: site map, OnSites, the site choice and the spanning cost.

Every expected number is worked out by hand in the test (the figures in comments), never by
calling the code under test a second time.

Sites used below (latency µs / bandwidth Gb/s)::

    [a] --500/400-- [b] --1,500/100-- [c]        [d] (no link)
"""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime

import pytest

from scheduling.placement import PlacementEngine, PoolTopology, Request, rail_optimized
from scheduling.placement.sites import OnSites, SiteChoice, SiteLinkSpec, SiteMap, SiteRule, choose_site
from scheduling.placement.sitespan import plan_span, ring_cost, span_needed
from tests.scheduling.sched_helpers import occupy

A, B, C, D = 0, 1, 2, 3
ABCD = SiteMap(
    ("site-a", "site-b", "site-c", "site-d"),
    {(A, B): SiteLinkSpec(500, 400), (C, B): SiteLinkSpec(1500, 100, "ethernet")},
)
TWO = SiteMap(("site-a", "site-b"), {(A, B): SiteLinkSpec(2000, 100)})
#: 2026-12-02 13:30 UTC: the "now" of the wall-clock explanations.
NOW = datetime(2026, 12, 2, 13, 30, tzinfo=UTC).timestamp()
MIN = 60.0
HOUR = 3600.0


# ---------------------------------------------------------------- the site map


def test_latency_direct_either_key_order_same_site_and_unconnected():
    assert ABCD.latency(A, B) == 500
    assert ABCD.latency(B, C) == 1500  # the link was given as (c, b)
    assert ABCD.latency(C, B) == 1500
    assert ABCD.latency(B, B) == 0
    assert math.isinf(ABCD.latency(A, D))
    assert ABCD.route(A, D) is None


def test_latency_routes_through_another_site_at_its_narrowest_link():
    # a → c has no direct link: a-b-c is 500 + 1,500 = 2,000 µs, at min(400, 100) = 100 Gb/s.
    route = ABCD.route(A, C)
    assert route is not None
    assert (route.latency_us, route.bandwidth_gbps, route.kind) == (2000, 100, "ib_router+ethernet")
    # A slower direct link loses to the faster route; a faster one wins.
    slow = SiteMap(ABCD.names, {**ABCD.links, (A, C): SiteLinkSpec(3000, 800)})
    assert slow.latency(A, C) == 2000
    fast = SiteMap(ABCD.names, {**ABCD.links, (A, C): SiteLinkSpec(1000, 800)})
    assert fast.latency(A, C) == 1000
    assert fast.route(C, A) == SiteLinkSpec(1000, 800)


def test_order_from_nearest_first_ties_by_index_unconnected_last():
    # From c: c 0, b 1,500, a 2,000, d inf.
    assert ABCD.order_from(C) == (C, B, A, D)
    # From d: d 0, then a, b, c all unconnected: by index.
    assert ABCD.order_from(D) == (D, A, B, C)
    assert ABCD.order_from(None) == (A, B, C, D)
    ties = SiteMap(("x", "y", "z"), {(0, 2): SiteLinkSpec(10, 1), (0, 1): SiteLinkSpec(10, 1)})
    assert ties.order_from(0) == (0, 1, 2)


def test_one_site_and_no_links():
    one = SiteMap(("only",))
    assert one.latency(0, 0) == 0
    assert one.order_from(0) == (0,)
    bare = SiteMap(("x", "y"))
    assert math.isinf(bare.latency(0, 1))
    assert bare.index("y") == 1
    assert bare.index("nope") is None


def test_unknown_sites_and_bad_links_are_refused():
    with pytest.raises(ValueError, match="unknown site index 4"):
        ABCD.latency(0, 4)
    with pytest.raises(ValueError, match="unknown site index -1"):
        ABCD.order_from(-1)
    with pytest.raises(ValueError, match="two distinct sites"):
        SiteMap(("x", "y"), {(0, 0): SiteLinkSpec(1, 1)})
    with pytest.raises(ValueError, match="two distinct sites"):
        SiteMap(("x", "y"), {(0, 2): SiteLinkSpec(1, 1)})


# ---------------------------------------------------------------- OnSites through the engine


def two_site_pool() -> PoolTopology:
    """Two SUs of 4 nodes: SU 0 at site a (nodes 0-3), SU 1 at site b (nodes 4-7)."""
    base = rail_optimized(2, nodes_per_su=4)
    nodes = tuple(dataclasses.replace(n, site=n.leaf_group) for n in base.nodes)
    return PoolTopology(base.name, nodes, base.groups, base.leaf_spines, base.spines, base.cores)


def test_on_sites_keeps_the_gang_on_its_sites():
    engine = PlacementEngine(two_site_pool())
    on_b = engine.place(Request(nodes=3, start=0, end=100, constraints=(OnSites(frozenset({B})),)), "j1")
    assert on_b and len(on_b.node_ids) == 3 and set(on_b.node_ids) <= {4, 5, 6, 7}
    # Site b has one node left: a 2-node gang held to b does not fit, while the pool has 5 free.
    assert not engine.preview(Request(nodes=2, start=0, end=100, constraints=(OnSites(frozenset({B})),)))
    either = engine.preview(Request(nodes=5, start=0, end=100, constraints=(OnSites(frozenset({A, B})),)))
    assert either and len(either.node_ids) == 5
    assert OnSites(frozenset({B, A})).describe() == "site in {0, 1}"
    named = OnSites(frozenset({B}), TWO.names)
    assert named.describe() == "site=site-b"
    assert named == OnSites(frozenset({B})) and hash(named) == hash(OnSites(frozenset({B})))
    # A site without nodes in this pool: the rejection names it.
    nowhere = OnSites(frozenset({C}), ABCD.names)
    refused = engine.preview(Request(nodes=1, start=0, end=100, constraints=(nowhere,)))
    assert not refused and refused.message == "no node in the pool matches the request (site=site-c)"


# ---------------------------------------------------------------- the site choice


def test_nearest_site_with_room_now_wins():
    got = choose_site({A: NOW, B: NOW}, TWO, now=NOW, near=B, patience=HOUR)
    assert got == SiteChoice(B, NOW, SiteRule.NEAREST_NOW, "near site-b: site-b has room now, so it runs at site-b")
    assert not got.waits


def test_nearer_later_within_patience_waits_with_the_tenants_sentence():
    # b in 35 min (14:05 UTC), a now, patience 1 h: 35 min <= 60 min, so it waits for b.
    got = choose_site({A: NOW, B: NOW + 35 * MIN}, TWO, now=NOW, near=B, patience=HOUR)
    assert (got.site, got.start, got.rule, got.waits) == (B, NOW + 35 * MIN, SiteRule.NEARER_LATER, True)
    assert got.explanation == (
        "near site-b: site-b has room at 14:05 UTC (in 35 min), within your patience of 1 h, "
        "so it waits for site-b rather than running now at site-a (latency 2,000 µs)"
    )


def test_wait_equal_to_patience_still_waits():
    got = choose_site({A: NOW, B: NOW + HOUR}, TWO, now=NOW, near=B, patience=HOUR)
    assert (got.site, got.rule) == (B, SiteRule.NEARER_LATER)


def test_farther_now_when_the_nearer_site_exceeds_patience():
    # b in 2 h (15:30 UTC) > 1 h of patience: run now at a.
    got = choose_site({A: NOW, B: NOW + 2 * HOUR}, TWO, now=NOW, near=B, patience=HOUR)
    assert (got.site, got.start, got.rule, got.waits) == (A, NOW, SiteRule.FARTHER_NOW, False)
    assert got.explanation == (
        "near site-b: site-b has room only at 15:30 UTC (in 2 h), beyond your patience of 1 h, "
        "so it runs now at site-a (latency 2,000 µs) rather than waiting for site-b"
    )


@pytest.mark.parametrize("patience", [None, 0.0])
def test_no_patience_never_waits_for_a_nearer_site(patience):
    got = choose_site({A: NOW, B: NOW + 1.0}, TWO, now=NOW, near=B, patience=patience)
    assert (got.site, got.rule) == (A, SiteRule.FARTHER_NOW)
    assert "beyond your patience (none)" in got.explanation


def test_farther_now_when_the_nearest_site_can_never_hold_it():
    got = choose_site({A: NOW, B: None}, TWO, now=NOW, near=B, patience=HOUR)
    assert (got.site, got.rule) == (A, SiteRule.FARTHER_NOW)
    assert got.explanation.startswith("near site-b: site-b cannot hold it, so it runs now at site-a")


def test_nearer_later_waits_for_the_nearest_site_within_patience():
    # Near a: order a (0), b (500), c (2,000). a in 50 min, b in 10 min, c now, patience 1 h:
    # a's 50 min is within 1 h of c's start (now), and a is the nearest.
    got = choose_site({A: NOW + 50 * MIN, B: NOW + 10 * MIN, C: NOW}, ABCD, now=NOW, near=A, patience=HOUR)
    assert (got.site, got.start, got.rule) == (A, NOW + 50 * MIN, SiteRule.NEARER_LATER)
    assert got.explanation == (
        "near site-a: site-a has room at 14:20 UTC (in 50 min), within your patience of 1 h, so it waits "
        "for site-a rather than running now at site-c (latency 2,000 µs)"
    )
    # a in 70 min is beyond 1 h: b, the next nearest, in 10 min.
    got = choose_site({A: NOW + 70 * MIN, B: NOW + 10 * MIN, C: NOW}, ABCD, now=NOW, near=A, patience=HOUR)
    assert (got.site, got.start, got.rule) == (B, NOW + 10 * MIN, SiteRule.NEARER_LATER)
    assert got.explanation == (
        "near site-a: site-b has room at 13:40 UTC (in 10 min), within your patience of 1 h, so it waits "
        "for site-b rather than running now at site-c (latency 2,000 µs); "
        "site-a has room only at 14:40 UTC (in 1 h 10 min), beyond your patience of 1 h"
    )


def test_sites_farther_than_one_with_room_now_are_not_waited_for():
    # Near c: order c, b (1,500), a (2,000). c in 30 min, b now, a in 5 min: a is farther than b.
    got = choose_site({A: NOW + 5 * MIN, B: NOW, C: NOW + 30 * MIN}, ABCD, now=NOW, near=C, patience=HOUR)
    assert (got.site, got.rule) == (C, SiteRule.NEARER_LATER)
    got = choose_site({A: NOW + 5 * MIN, B: NOW, C: NOW + 90 * MIN}, ABCD, now=NOW, near=C, patience=HOUR)
    assert (got.site, got.rule) == (B, SiteRule.FARTHER_NOW)


def test_nothing_now_patience_counts_from_the_soonest_start():
    # a in 2 h (15:30), b (the data) in 3 h 30 min: 1 h 30 min later than a, beyond 1 h.
    got = choose_site({A: NOW + 2 * HOUR, B: NOW + 3.5 * HOUR}, TWO, now=NOW, near=B, patience=HOUR)
    assert (got.site, got.start, got.rule, got.waits) == (A, NOW + 2 * HOUR, SiteRule.SOONEST, True)
    assert got.explanation == (
        "near site-b: no site has room now; site-a has room soonest, at 15:30 UTC (in 2 h), so it waits for "
        "site-a (latency 2,000 µs); site-b has room only at 17:00 UTC (in 3 h 30 min), more than your "
        "patience of 1 h after site-a"
    )
    # b in 3 h: exactly 1 h after a, within patience: it waits for b.
    got = choose_site({A: NOW + 2 * HOUR, B: NOW + 3 * HOUR}, TWO, now=NOW, near=B, patience=HOUR)
    assert (got.site, got.start, got.rule) == (B, NOW + 3 * HOUR, SiteRule.NEARER_LATER)
    assert got.explanation == (
        "near site-b: no site has room now; site-b has room at 16:30 UTC (in 3 h), 1 h after site-a, within "
        "your patience of 1 h, so it waits for site-b rather than for site-a (latency 2,000 µs)"
    )
    # The docstring's case: b in 30 min, a in 29 min, patience 1 h: stays with its data.
    got = choose_site({A: NOW + 29 * MIN, B: NOW + 30 * MIN}, TWO, now=NOW, near=B, patience=HOUR)
    assert (got.site, got.rule) == (B, SiteRule.NEARER_LATER)
    # No patience: the soonest, even one minute sooner; equal starts: the nearer.
    got = choose_site({A: NOW + 29 * MIN, B: NOW + 30 * MIN}, TWO, now=NOW, near=B, patience=None)
    assert (got.site, got.rule) == (A, SiteRule.SOONEST)
    assert got.explanation.endswith(
        "site-b has room only at 14:00 UTC (in 30 min), later than site-a, and you gave no patience"
    )
    got = choose_site({A: NOW + 2 * HOUR, B: NOW + 2 * HOUR}, TWO, now=NOW, near=B, patience=None)
    assert (got.site, got.rule) == (B, SiteRule.SOONEST)
    assert got.explanation == (
        "near site-b: no site has room now; site-b has room soonest, at 15:30 UTC (in 2 h), so it waits for site-b"
    )


def test_nothing_now_and_the_data_site_can_never_hold_it():
    got = choose_site({A: NOW + 20 * MIN, B: None}, TWO, now=NOW, near=B, patience=HOUR)
    assert (got.site, got.rule) == (A, SiteRule.SOONEST)
    assert got.explanation == (
        "near site-b: no site has room now; site-a has room soonest, at 13:50 UTC (in 20 min), so it waits for "
        "site-a (latency 2,000 µs); site-b cannot hold it"
    )


def test_no_site_can_hold_it():
    got = choose_site({A: None, B: None}, TWO, now=NOW, near=B, patience=HOUR)
    assert got == SiteChoice(None, None, SiteRule.NONE, "near site-b: no site of the pool can hold it")
    assert choose_site({A: None}, TWO, now=NOW).site is None
    assert choose_site({}, TWO, now=NOW, near=A).rule == SiteRule.NONE


def test_near_a_site_without_nodes_in_the_pool():
    # The data is at c, which has no nodes here: b (1,500 µs) is nearer than a (2,000 µs).
    got = choose_site({A: NOW, B: NOW}, ABCD, now=NOW, near=C)
    assert (got.site, got.rule) == (B, SiteRule.NEAREST_NOW)
    assert got.explanation == (
        "near site-c: site-b, the nearest site of the pool (latency 1,500 µs), has room now, so it runs at site-b"
    )


def test_near_unconnected_site_orders_candidates_by_index():
    got = choose_site({B: NOW, C: NOW}, ABCD, now=NOW, near=D)
    assert got.site == B
    assert "(no link known from site-d)" in got.explanation


def test_near_unknown_is_refused():
    with pytest.raises(ValueError, match="unknown site index 9"):
        choose_site({A: NOW}, TWO, now=NOW, near=9)
    with pytest.raises(ValueError, match="unknown site index 5"):
        choose_site({5: NOW}, TWO, now=NOW, near=A)


def test_without_near_the_soonest_site_then_nearest_to_home():
    got = choose_site({A: NOW + 10 * MIN, B: NOW}, TWO, now=NOW)
    assert (got.site, got.rule, got.waits) == (B, SiteRule.SOONEST, False)
    assert got.explanation == "site-b has room soonest (now), the site of the pool that can place it first"
    assert choose_site({A: NOW, B: NOW}, TWO, now=NOW).site == A
    assert choose_site({A: NOW, B: NOW}, TWO, now=NOW, home=B).site == B
    # From home c: b (1,500) before a (2,000) on a tie.
    assert choose_site({A: NOW + HOUR, B: NOW + HOUR}, ABCD, now=NOW, home=C).site == B
    # Patience plays no part without near.
    assert choose_site({A: NOW + HOUR, B: NOW + 2 * HOUR}, TWO, now=NOW, patience=10 * HOUR).site == A


def test_one_site_pool_and_simulated_times():
    one = SiteMap(("solo",))
    got = choose_site({0: 2100.0}, one, now=0.0, near=0, patience=HOUR)
    assert (got.site, got.start, got.rule) == (0, 2100.0, SiteRule.SOONEST)
    assert (
        got.explanation
        == "near solo: no site has room now; solo has room soonest, at t=2100s (in 35 min), so it waits for solo"
    )
    assert choose_site({0: 0.0}, one, now=5.0, near=0).rule == SiteRule.NEAREST_NOW  # a past start is now


# ---------------------------------------------------------------- spanning


def test_ring_cost_of_two_sites():
    # n = 16 ranks, S = 1 GiB: each edge carries 2·15/16·2^30 = 2,013,265,920 bytes; at 100 Gb/s
    # that is 2,013,265,920·8/1e11 = 0.1610612736 s, plus 2,000 µs × 30 steps = 0.06 s.
    cost = ring_cost(TWO, (A, B), 16, float(1 << 30))
    assert cost.k == 2
    assert [(c.src, c.dst) for c in cost.crossings] == [(A, B), (B, A)]
    assert all(c.bytes == 2_013_265_920 for c in cost.crossings)
    assert cost.seconds == pytest.approx(0.2210612736)
    assert cost.sentence(TWO) == (
        "a ring all-reduce of 1.00 GiB over 16 ranks crosses 2 inter-site links (site-a→site-b, site-b→site-a), "
        "each carrying 1.88 GiB per all-reduce; the slowest (site-a→site-b) takes 221.1 ms: 1.88 GiB at "
        "100 Gb/s plus 2,000 µs × 30 steps"
    )


def test_ring_cost_of_one_site_and_of_three():
    assert ring_cost(TWO, (B,), 8).k == 0
    assert ring_cost(TWO, (B,), 8).seconds == 0
    assert ring_cost(TWO, (B,), 8).sentence(TWO) == "on one site (site-b): no all-reduce traffic between sites"
    # a → b → c → a: 3 edges; the slowest is c → a routed via b (2,000 µs at 100 Gb/s).
    # n = 4, S = 1 MiB: bytes = 2·3/4·1,048,576 = 1,572,864; time = 1,572,864·8/1e11 + 0.002·6.
    cost = ring_cost(ABCD, (A, B, C), 4, float(1 << 20))
    assert cost.k == 3
    assert cost.seconds == pytest.approx(0.00012582912 + 0.012)
    assert cost.total_latency_us == 500 + 1500 + 2000
    with pytest.raises(ValueError):
        ring_cost(TWO, (), 4)


def test_ring_over_unconnected_sites_costs_infinity():
    cost = ring_cost(ABCD, (A, D), 2)
    assert math.isinf(cost.seconds)
    assert cost.sentence(ABCD).endswith("site-a and site-d have no link between them")


THREE = SiteMap(
    ("x", "y", "z"),
    {(0, 1): SiteLinkSpec(100, 100), (0, 2): SiteLinkSpec(100, 100), (1, 2): SiteLinkSpec(100, 400)},
)


def test_plan_span_fewest_sites_first():
    plan = plan_span(THREE, 6, free={0: 4, 1: 4, 2: 8})
    assert plan is not None and plan.split == ((2, 6),) and plan.cost.k == 0


def test_plan_span_best_connected_pair_and_split_largest_free_first():
    # 10 nodes: {x, y} has 8 (too few); {x, z} and {y, z} have 12. y-z at 400 Gb/s beats x-z at 100.
    plan = plan_span(THREE, 10, free={0: 4, 1: 4, 2: 8}, gpus_per_node=8)
    assert plan is not None
    assert plan.sites == (1, 2)
    assert plan.split == ((1, 2), (2, 8))  # z (8 free) filled first, y takes the other 2
    assert plan.cost.ranks == 80
    assert plan.explanation.startswith("split over 2 sites (2 nodes at y, 8 nodes at z); a ring all-reduce")


def test_plan_span_fills_the_data_site_first():
    plan = plan_span(THREE, 10, free={0: 4, 1: 4, 2: 8}, near=1)
    assert plan is not None and plan.split == ((1, 4), (2, 6))
    assert plan.explanation.startswith("near y: split over 2 sites (4 nodes at y, 6 nodes at z)")


def test_plan_span_with_an_engine_callback_tries_sets_in_order():
    tried: list[tuple[int, ...]] = []

    def place(ring: tuple[int, ...]) -> dict[int, int] | None:
        tried.append(ring)
        return {ring[0]: 10}

    # No free counts: single sites come first, and the callback takes x alone.
    plan = plan_span(THREE, 10, place=place)
    assert plan is not None and tried == [(0,)] and plan.split == ((0, 10),)

    def only_pairs(ring: tuple[int, ...]) -> dict[int, int] | None:
        tried.append(ring)
        if len(ring) < 2 or ring == (1, 2):
            return None
        return {ring[0]: 3, ring[1]: 7}

    tried.clear()
    plan = plan_span(THREE, 10, place=only_pairs)
    # Pairs by cost: (1, 2) at 400 Gb/s first (refused), then (0, 1) and (0, 2) tie on cost and
    # latency: lowest indices first.
    assert tried == [(0,), (1,), (2,), (1, 2), (0, 1)]
    assert plan is not None and plan.split == ((0, 3), (1, 7))


def test_plan_span_through_the_engine_splits_a_gang_over_two_sites():
    # Site a (nodes 0-3) and site b (nodes 4-7) each have one node free: no site holds 2 nodes.
    engine = PlacementEngine(two_site_pool())
    occupy(engine, [0, 1, 2, 4, 5, 6], end=1000)
    pool = two_site_pool()

    def place(ring: tuple[int, ...]) -> dict[int, int] | None:
        got = engine.preview(Request(nodes=2, start=0, end=100, constraints=(OnSites(frozenset(ring)),)))
        if not got:
            return None
        counts: dict[int, int] = {}
        for node in got.node_ids:
            counts[pool.nodes[node].site] = counts.get(pool.nodes[node].site, 0) + 1
        return counts

    plan = plan_span(TWO, 2, place=place, near=B, gpus_per_node=8)
    assert plan is not None
    assert plan.split == ((A, 1), (B, 1))
    # 16 ranks over one 2,000 µs / 100 Gb/s link: 0.2210612736 s (test_ring_cost_of_two_sites).
    assert plan.cost.k == 2 and plan.cost.seconds == pytest.approx(0.2210612736)
    assert plan.explanation.startswith("near site-b: split over 2 sites (1 node at site-a, 1 node at site-b)")


def test_plan_span_refuses_unconnected_sets_and_too_few_nodes():
    assert plan_span(ABCD, 6, free={A: 4, D: 4}) is None
    assert plan_span(TWO, 9, free={A: 4, B: 4}) is None
    with pytest.raises(ValueError):
        plan_span(TWO, 0, free={A: 1})


def test_span_needed():
    later = SiteChoice(A, NOW + 2 * HOUR, SiteRule.SOONEST, "", waits=True)
    assert span_needed(later, now=NOW, patience=HOUR)
    assert not span_needed(later, now=NOW, patience=2 * HOUR)
    assert span_needed(later, now=NOW, patience=None)
    assert not span_needed(SiteChoice(A, NOW, SiteRule.NEAREST_NOW, ""), now=NOW, patience=None)
    assert span_needed(SiteChoice(None, None, SiteRule.NONE, ""), now=NOW, patience=HOUR)
