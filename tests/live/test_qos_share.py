"""The traffic model shares a congested link by VL arbitration (no lab, no database).

    a, b -- leaf1 [3] ---- [1] spine [2] ---- [3] leaf2 -- c, d        every link 400 Gb/s

A training ring a⇄c and an inference ring b⇄d both cross leaf1[3] → spine → leaf2.
"""

from __future__ import annotations

import pytest

from console.fabric.opensm.qos_table import DEFAULT_TABLE
from console.telemetry.arbitration import Arbitration, share, water_fill
from console.telemetry.core import LinkEnd
from console.telemetry.linkmap import LinkMap
from console.telemetry.traffic import Job, route_load
from console.telemetry.workload import arbitration_of

G = 1e9
LINE = 400.0
OPTIONS = DEFAULT_TABLE.options()
VL = {c.name: OPTIONS.sl2vl[c.sl] for c in DEFAULT_TABLE.classes}  # class → VL, through its SL
UPLINK = ("leaf1", 3)  # the shared link, leaving leaf1 towards the spine


def two_leaves() -> tuple[LinkMap, dict[str, list[int]]]:
    lm = LinkMap()
    lm.tiers = {"leaf1": "leaf", "leaf2": "leaf", "spine": "spine"}
    lm.node_lids = {"a": [1], "b": [2], "c": [3], "d": [4]}
    lm.node_uplinks = {"a": {1: ("leaf1", 1)}, "b": {1: ("leaf1", 2)}, "c": {1: ("leaf2", 1)}, "d": {1: ("leaf2", 2)}}
    lm.ports = {
        "leaf1": {1: ("a", 1), 2: ("b", 1), 3: ("spine", 1)},
        "leaf2": {1: ("c", 1), 2: ("d", 1), 3: ("spine", 2)},
        "spine": {1: ("leaf1", 3), 2: ("leaf2", 3)},
    }
    for sw, port, peer, peer_port, tier in (
        ("leaf1", 1, "a", 1, "node_leaf"),
        ("leaf1", 2, "b", 1, "node_leaf"),
        ("leaf2", 1, "c", 1, "node_leaf"),
        ("leaf2", 2, "d", 1, "node_leaf"),
        ("spine", 1, "leaf1", 3, "leaf_spine"),
        ("spine", 2, "leaf2", 3, "leaf_spine"),
    ):
        lm.ends[f"{sw}/{port}"] = LinkEnd(f"{sw}/{port}", sw, port, peer, peer_port, tier, LINE)
    # forwarding tables indexed by destination LID (a=1, b=2, c=3, d=4)
    lfts = {"leaf1": [0, 1, 2, 3, 3], "leaf2": [0, 3, 3, 1, 2], "spine": [0, 1, 1, 2, 2]}
    return lm, lfts


def jobs(training_gbps: float, inference_gbps: float) -> list[Job]:
    return [
        Job("training", ("a", "c"), gbps=training_gbps, vl=VL["training"]),
        Job("inference", ("b", "d"), gbps=inference_gbps, vl=VL["inference"]),
    ]


def test_inference_keeps_its_share_next_to_saturating_training():
    lm, lfts = two_leaves()
    arbitration = arbitration_of(OPTIONS)
    # training saturates the spine link (line rate), inference wants 80 Gb/s of it
    load = route_load(jobs(LINE, 80.0), lm, lfts, arbitration)
    assert load.unrouted == 0
    assert load.wanted[UPLINK] == {VL["training"]: LINE * G, VL["inference"]: 80.0 * G}
    granted = load.granted[UPLINK]
    assert granted[VL["inference"]] == pytest.approx(80.0 * G)  # all of it: served first
    assert granted[VL["training"]] == pytest.approx((LINE - 80.0) * G)  # the rest
    assert load.xmit[UPLINK] == pytest.approx(LINE * G)  # the link runs full, not over
    assert load.rcv[("spine", 1)] == pytest.approx(LINE * G)  # and its far end receives that

    # without arbitration (one VL, first come first served) inference loses a sixth of its traffic
    fifo = route_load(jobs(LINE, 80.0), lm, lfts)
    assert fifo.xmit[UPLINK] == pytest.approx((LINE + 80.0) * G)  # the model without QoS: no sharing
    assert share(fifo.wanted[UPLINK], LINE * G, None)[VL["inference"]] == pytest.approx(80.0 * LINE / 480.0 * G)


def test_the_high_limit_bounds_inference_so_training_is_never_starved():
    lm, lfts = two_leaves()
    load = route_load(jobs(LINE, LINE), lm, lfts, arbitration_of(OPTIONS))
    granted = load.granted[UPLINK]
    # high_limit × 4 KB of inference, then one 4 KB training packet
    burst = OPTIONS.high_limit * 4096
    high_fraction = burst / (burst + 4096)
    assert granted[VL["inference"]] == pytest.approx(LINE * high_fraction * G)
    assert granted[VL["training"]] == pytest.approx(LINE * (1 - high_fraction) * G)
    assert granted[VL["training"]] > 0


def test_the_low_table_shares_by_weight_and_gives_back_what_a_vl_does_not_use():
    weights = dict(OPTIONS.vlarb_low)
    training, best_effort = VL["training"], VL["best-effort"]
    # both saturate: 192 : 64
    got = share({training: LINE * G, best_effort: LINE * G}, LINE * G, arbitration_of(OPTIONS))
    expected_training = LINE * weights[training] / (weights[training] + weights[best_effort])
    assert got[training] == pytest.approx(expected_training * G)
    assert got[best_effort] == pytest.approx((LINE - expected_training) * G)
    # best-effort wants little: it gets it all, training the rest (work conserving)
    got = share({training: LINE * G, best_effort: 30 * G}, LINE * G, arbitration_of(OPTIONS))
    assert got[best_effort] == pytest.approx(30 * G) and got[training] == pytest.approx((LINE - 30) * G)
    # a VL in no table is not served
    assert share({9: LINE * G}, LINE * G, Arbitration(low=((0, 10),)))[9] == 0.0


def test_water_fill_edges():
    assert water_fill({1: 10.0, 2: 10.0}, {1: 1, 2: 3}, 8.0) == {1: 2.0, 2: 6.0}
    assert water_fill({1: 1.0, 2: 10.0}, {1: 1, 2: 1}, 8.0) == {1: 1.0, 2: 7.0}
    assert water_fill({1: 5.0}, {1: 0}, 8.0) == {1: 0.0}
