"""The health policy (console.telemetry.health_policy) on recorded counters: it isolates exactly
the ports its thresholds name, never an allowed one, never more than the cap, restores a port
after the clean period, and over a replayed day of the demo's flapping cable it acts on that
link only, each time the flaps counted here (from the flapper's own schedule) cross the rule.
Expected decisions are counted in the tests, not read from the code under test."""

from __future__ import annotations

import pytest

from console.fabric.flapper import DEMO_FLAP
from console.telemetry.health_policy import (
    DEFAULT_POLICY,
    Evaluator,
    Policy,
    PolicyError,
    Rule,
    parse_policy,
    replay,
)

SWEEP_S = 60.0
SYMBOLS = Policy(rules=(Rule("SymbolErrorCounter", 10, 3600.0),), cap_min=10, clean_s=1800.0)


def minutes(n: int):
    return [i * SWEEP_S for i in range(n)]


def test_a_port_is_isolated_at_the_first_sweep_its_rise_passes_the_threshold():
    # A: +1 symbol error a minute (11 within the hour at minute 11); B: exactly 10 in the hour;
    # C: 30 errors over 6 hours (5 an hour); D: a burst of 11 in one sweep at minute 90
    rows = []
    for i, at in enumerate(minutes(6 * 60)):
        rows.append((at, ("leaf", 1), {"SymbolErrorCounter": float(i)}))
        rows.append((at, ("leaf", 2), {"SymbolErrorCounter": float(min(i, 10))}))
        rows.append((at, ("leaf", 3), {"SymbolErrorCounter": float(i // 12)}))
        rows.append((at, ("leaf", 4), {"SymbolErrorCounter": 11.0 if i >= 90 else 0.0}))
    decisions = [d for d in replay(SYMBOLS, rows, ports=100) if d.kind == "isolate"]
    assert [(d.port, d.at) for d in decisions] == [(("leaf", 1), 11 * SWEEP_S), (("leaf", 4), 90 * SWEEP_S)]
    first = decisions[0]
    assert first.reasons == ["SymbolErrorCounter +11 in 660 s > 10 per 3600 s"]
    assert [s["SymbolErrorCounter"] for s in first.samples] == [float(i) for i in range(12)]


def test_the_allow_list_and_the_cap_hold():
    policy = Policy(rules=SYMBOLS.rules, cap_min=3, cap_fraction=0.0, allow=frozenset({("leaf", 0)}))
    evaluator = Evaluator(policy, ports=100)
    ports = [("leaf", p) for p in range(6)]
    evaluator.observe(0.0, {p: {"SymbolErrorCounter": 0.0} for p in ports})
    decisions = evaluator.observe(60.0, {p: {"SymbolErrorCounter": 50.0} for p in ports})
    assert [(d.port[1], d.kind) for d in decisions] == [
        (1, "isolate"),
        (2, "isolate"),
        (3, "isolate"),
        (4, "capped"),
        (5, "capped"),
    ]
    assert decisions[-1].reasons[-1] == "the cap of 3 isolated ports is reached"
    assert Policy(rules=(), cap_min=10, cap_fraction=0.005).cap(4096) == 20
    assert Policy(rules=(), cap_min=10, cap_fraction=0.005).cap(512) == 10


def test_a_port_comes_back_after_the_clean_period_and_a_counter_reset_counts_from_zero():
    evaluator = Evaluator(SYMBOLS, ports=100)
    port = ("spine", 7)
    decisions = []
    for i, at in enumerate(minutes(200)):
        # 20 errors in the first 20 minutes, then the counters are cleared (perfquery -R) and stay
        total = float(min(i, 20)) if i < 30 else 0.0
        decisions += [(d.kind, d.at) for d in evaluator.observe(at, {port: {"SymbolErrorCounter": total}})]
    # it crosses while more than 10 of the error minutes (1..20) lie within the trailing hour;
    # the clearing at minute 30 adds nothing; 30 clean minutes after the last crossing it is back
    crossing = [m for m in range(200) if len([e for e in range(1, 21) if m - 60 < e <= m]) > 10]
    assert decisions[0] == ("isolate", crossing[0] * SWEEP_S)
    assert decisions[1] == ("restore", crossing[-1] * SWEEP_S + 1800.0)
    assert len(decisions) == 2


def test_a_gauge_crosses_on_the_value_read():
    policy = Policy(rules=(Rule("Temperature", 85, 600),))
    evaluator = Evaluator(policy, ports=10)
    assert evaluator.observe(0.0, {("leaf", 1): {"Temperature": 84.0}}) == []
    (decision,) = evaluator.observe(60.0, {("leaf", 1): {"Temperature": 91.0}})
    assert decision.reasons == ["Temperature 91 > 85"]


def flapper_day(policy: Policy, others: int = 510):
    """A day of the demo's flapping cable, swept every minute, the cable's counters answering the
    policy's decisions (an isolated port is disabled: the flapper's unplugs count no more link
    downs until it is restored). Returns the decisions and the flap times that counted."""
    link = ((DEMO_FLAP.node, DEMO_FLAP.port), ("spine-01", 1))
    period = DEMO_FLAP.every_s + DEMO_FLAP.down_s
    evaluator = Evaluator(policy, ports=others + 2, peers={link[0]: link[1], link[1]: link[0]})
    quiet = {("other", i): {"LinkDownedCounter": 0.0, "SymbolErrorCounter": float(i % 9)} for i in range(others)}
    counted: list[float] = []
    downs = 0.0
    decisions = []
    flap_at = DEMO_FLAP.every_s
    for at in minutes(24 * 60):
        while flap_at <= at:
            if not (set(link) & set(evaluator.isolated)):
                downs += 1
                counted.append(flap_at)
            flap_at += period
        readings = {**quiet, link[0]: {"LinkDownedCounter": downs}, link[1]: {"LinkDownedCounter": downs}}
        decisions += evaluator.observe(at, readings)
    return decisions, counted, link


def test_a_replayed_day_of_the_flapping_cable_acts_on_that_link_only_and_only_when_it_crosses():
    decisions, counted, link = flapper_day(DEFAULT_POLICY)
    assert decisions, "the cable flaps every 98 s: more than 5 link downs an hour"
    assert len({d.port for d in decisions}) == 1 and {d.port for d in decisions} <= set(link)  # that link, one end
    rule = next(r for r in DEFAULT_POLICY.rules if r.counter == "LinkDownedCounter")
    for d in decisions:
        in_window = [t for t in counted if d.at - rule.window_s < t <= d.at]
        if d.kind == "isolate":
            # the flaps the sweep saw within the hour pass the threshold, and one sweep earlier they did not
            assert len(in_window) > rule.threshold
            before = [t for t in counted if d.at - SWEEP_S - rule.window_s < t <= d.at - SWEEP_S]
            assert len(before) <= rule.threshold or d is decisions[0]
        else:
            assert d.kind == "restore" and not [t for t in counted if d.at - DEFAULT_POLICY.clean_s < t <= d.at]
    kinds = [d.kind for d in decisions]
    assert kinds[0] == "isolate" and all(a != b for a, b in zip(kinds, kinds[1:], strict=False))  # alternating


def test_a_quiet_fabric_and_an_allowed_flapping_link_get_no_decision():
    allowed = Policy(rules=DEFAULT_POLICY.rules, allow=frozenset({("spine-01", 1)}))
    decisions, _, _ = flapper_day(allowed, others=50)
    assert decisions == []


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        ({"rules": [{"counter": "Bogus", "threshold": 1}]}, "rules[0].counter 'Bogus' is not one of"),
        ({"rules": [{"counter": "SymbolErrorCounter", "threshold": -1}]}, "rules[0].threshold is a number from 0"),
        ({"rules": [{"counter": "SymbolErrorCounter", "threshold": 1}] * 2}, "one rule per counter"),
        ({"rules": [], "allow": ["leaf1"]}, "allow entry 'leaf1' is not switch/port"),
        ({"rules": [], "dry_run": "no"}, "dry_run is true or false"),
        ({"rules": [], "clean_s": 5}, "clean_s is a number from 60"),
    ],
)
def test_bad_policies_say_what_is_wrong(doc, error):
    with pytest.raises(PolicyError, match=error.replace("[", r"\[").replace("]", r"\]")):
        parse_policy(doc)


def test_the_default_round_trips():
    assert parse_policy(DEFAULT_POLICY.as_json()) == DEFAULT_POLICY
