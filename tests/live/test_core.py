"""The pure collector core, alarms and schemas (no database, no lab)."""

from __future__ import annotations

import pytest

from console.live.schemas import SchemaError, check
from console.telemetry.alarms import AlarmEngine, AlarmRules
from console.telemetry.core import LinkEnd, LinkStatus, PortReading, bucket_of, link_status
from console.telemetry.readers import parse_ibroute, parse_perfquery_ports

END = LinkEnd("leaf1/7", "leaf1", 7, "spine1", 1, "leaf_spine", 400.0)


def test_data_counters_count_four_octet_words():
    # 100 Gb/s for 2 s = 25 GB = 6.25 G words
    before = PortReading(xmit_words=1_000, rcv_words=0)
    now = PortReading(xmit_words=1_000 + 6_250_000_000, rcv_words=0, state="Active")
    st = link_status(END, now, before, 2.0)
    assert st.tx_bps == pytest.approx(100e9)
    assert st.utilisation == pytest.approx(0.25)
    assert st.bucket == 2


def test_counter_reset_is_not_a_negative_rate_and_down_links_are_not_coloured():
    st = link_status(END, PortReading(10, 10, {}, "Active"), PortReading(500, 500), 1.0)
    assert st.tx_bps == 320 and st.rx_bps == 320
    down = link_status(END, PortReading(10**12, 0, {}, "Down"), PortReading(0, 0), 1.0)
    assert not down.up and down.bucket == 0
    assert link_status(END, None, None, 1.0).up is False
    assert [bucket_of(x) for x in (0, 0.2, 0.3, 0.6, 0.8, 0.95)] == [0, 1, 2, 3, 4, 5]


def test_error_alarm_opens_over_threshold_and_clears_only_after_quiet_sweeps():
    engine = AlarmEngine(AlarmRules(open_at=10, clear_at=0, clear_sweeps=3))

    def sweep(errors: int):
        return engine.links({"a/1": LinkStatus("a/1", True, errors={"SymbolErrorCounter": errors})})

    assert sweep(9) == []
    opened = sweep(12)
    assert [(t.action, t.kind) for t in opened] == [("open", "link_errors")]
    # hovering errors and two quiet sweeps do not clear it
    assert sweep(3) == [] and sweep(0) == [] and sweep(0) == []
    assert sweep(5) == []
    assert sweep(0) == [] and sweep(0) == []
    assert [t.action for t in sweep(0)] == ["clear"]


def test_link_down_and_routing_fallback_and_sm_transitions():
    engine = AlarmEngine()
    down = engine.links({"a/1": LinkStatus("a/1", False)})
    assert [(t.action, t.kind, t.severity) for t in down] == [("open", "link_down", "critical")]
    assert engine.links({"a/1": LinkStatus("a/1", False)}) == []
    assert [t.action for t in engine.links({"a/1": LinkStatus("a/1", True)})] == ["clear"]
    assert [t.action for t in engine.routing("ftree", "minhop", True)] == ["open"]
    assert engine.routing("ftree", "minhop", True) == []
    assert [t.action for t in engine.routing("ftree", "ftree", False)] == ["clear"]
    assert engine.sm_state("MASTER") == []
    assert [t.action for t in engine.sm_state("NO ANSWER")] == ["open"]
    assert [t.action for t in engine.sm_state("MASTER")] == ["clear"]


def test_a_link_that_keeps_dropping_is_one_flapping_alarm_with_its_history():
    engine = AlarmEngine(AlarmRules(flap_drops=3, flap_window_s=600))
    cable = LinkEnd("spine-01/1", "spine-01", 1, "su01-leaf-r1", 33, "leaf_spine", 400.0, "NDR-AOC", 10)

    def sweep(up: bool, at: float):
        return [
            (t.action, t.kind)
            for t in engine.links(
                {"spine-01/1": LinkStatus("spine-01/1", up)}, now=at, describe=lambda _: cable.describe()
            )
        ]

    # the demo's cable: down 8 s every 90 s; the first two drops are link-down events
    assert sweep(False, 0) == [("open", "link_down")]
    assert sweep(False, 4) == []  # still the same drop
    assert sweep(True, 8) == [("clear", "link_down")]
    assert sweep(False, 98) == [("open", "link_down")]
    assert sweep(True, 106) == [("clear", "link_down")]
    # the third within ten minutes: one flapping alarm instead, named by both ends and the cable
    third = engine.links({"spine-01/1": LinkStatus("spine-01/1", False)}, now=196, describe=lambda _: cable.describe())
    assert [(t.action, t.kind) for t in third] == [("open", "link_flapping")]
    assert third[0].message == "link spine-01/1 ↔ su01-leaf-r1/33 (NDR-AOC, 10 m) is flapping: 3 drops in 10 min"
    assert third[0].detail["history"] == [0, 98, 196] and third[0].detail["per_hour"] == 18.0
    # it stays open between drops (no link-down event, nothing resolved), each drop adds to it
    assert sweep(True, 204) == []
    grown = engine.links({"spine-01/1": LinkStatus("spine-01/1", False)}, now=294)
    assert [(t.action, t.kind) for t in grown] == [("update", "link_flapping")] and grown[0].detail["drops"] == 4
    assert sweep(True, 302) == []
    # a whole window up clears it; a later single drop is a link-down event again
    assert sweep(True, 294 + 599) == []
    assert sweep(True, 294 + 600) == [("clear", "link_flapping")]
    assert sweep(False, 5000) == [("open", "link_down")]


def test_a_restarted_collector_keeps_a_stored_flapping_alarm_open_for_a_window():
    engine = AlarmEngine(AlarmRules(flap_window_s=600))
    engine.seed({"link_flapping": {"a/1"}})
    assert engine.links({"a/1": LinkStatus("a/1", True)}, now=10_000) == []
    assert engine.links({"a/1": LinkStatus("a/1", False)}, now=10_100)[0].action == "update"
    assert [t.action for t in engine.links({"a/1": LinkStatus("a/1", True)}, now=10_700)] == ["clear"]


def test_perfquery_loop_output_and_ibroute_parse():
    text = (
        "# Port extended counters: Lid 2 port 1 (CapMask: 0x1300)\nPortSelect:....1\n"
        "PortXmitData:......22464\nPortRcvData:.....7\n"
        "# Port extended counters: Lid 2 port 2 (CapMask: 0x1300)\nPortSelect:....2\n"
        "PortXmitData:......5\nPortRcvData:.....6\n"
    )
    ports = parse_perfquery_ports(text)
    assert ports[1]["PortXmitData"] == 22464 and ports[2]["PortRcvData"] == 6
    route = "Unicast lids [0x0-0x5] of switch Lid 2\n  Lid  Out\n0x0003 033 : (CA)\n0x0005 007 : (SW)\n"
    assert parse_ibroute(route, 5) == [0, 0, 0, 33, 0, 7]


def test_live_message_schemas_are_checked():
    link = {
        "id": "l/1",
        "up": True,
        "bucket": 1,
        "util": 0.1,
        "tx_bps": 1,
        "rx_bps": 2,
        "errors": {},
        "error_totals": {},
        "xmit_wait": 0,
    }
    check({"type": "link.delta", "group": "fabric.1", "seq": 1, "fabric": 1, "at": 1.5, "links": [link]})
    with pytest.raises(SchemaError):
        check(
            {
                "type": "link.delta",
                "group": "fabric.1",
                "seq": 1,
                "fabric": 1,
                "at": 1.5,
                "links": [dict(link, tenant="acme")],
            }
        )
    with pytest.raises(SchemaError, match="seq: expected int"):
        check({"type": "link.delta", "group": "g", "seq": "1", "fabric": 1, "at": 1.0, "links": []})
    with pytest.raises(SchemaError, match="up: expected bool"):
        check({"type": "link.delta", "group": "g", "seq": 1, "fabric": 1, "at": 1.0, "links": [dict(link, up=1)]})
    with pytest.raises(SchemaError):
        check({"type": "nope"})


def test_each_link_is_read_at_one_switch_port_and_gives_both_directions():
    from console.telemetry.core import sweep_status
    from console.telemetry.linkmap import build_link_map
    from designer.builtin_catalogue import DEFAULT_CATALOGUE
    from designer.plan import plan

    options = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
    graph = plan(options, DEFAULT_CATALOGUE).graph
    lm = build_link_map(graph)
    measured = [(sw, p) for sw, plist in lm.measured_ports().items() for p in plist]
    # one read per link, at a switch port: the leaf end of host links, the spine end of uplinks
    assert len(measured) == len(set(measured)) == len(lm.ends) == len(graph.links)
    assert all(sw in graph.switches for sw, _ in measured)
    host = next(e for e in lm.ends.values() if e.peer in graph.nodes)
    uplink = next(e for e in lm.ends.values() if e.peer in graph.switches)
    assert lm.tiers[host.switch] != lm.tiers[uplink.switch]
    # the far end is never read: its Xmit is this end's Rcv and the other way round
    assert (uplink.peer, uplink.peer_port) not in measured
    before = {(e.switch, e.port): PortReading(0, 0, {}, "Active") for e in (host, uplink)}
    gbit = 1e9 / 32  # 4-octet words per second at 1 Gb/s
    now = {
        (host.switch, host.port): PortReading(int(100 * gbit), int(40 * gbit), {}, "Active"),
        (uplink.switch, uplink.port): PortReading(int(10 * gbit), int(300 * gbit), {}, "Active"),
    }
    st = sweep_status([host, uplink], now, before, 1.0)
    # tx: switch port → peer (leaf → HCA, spine → leaf); rx: peer → switch port
    assert st[host.link_id].tx_bps == pytest.approx(100e9, rel=1e-6)
    assert st[host.link_id].rx_bps == pytest.approx(40e9, rel=1e-6)
    assert st[uplink.link_id].tx_bps == pytest.approx(10e9, rel=1e-6)
    assert st[uplink.link_id].rx_bps == pytest.approx(300e9, rel=1e-6)
    assert st[uplink.link_id].utilisation == pytest.approx(0.75)


def test_a_switch_that_does_not_answer_for_a_few_sweeps_is_not_a_link_down():
    """A busy SMA or a loaded SM host times a whole switch's MADs out: its links keep their last
    state read for UNANSWERED_GRACE sweeps; one that stays silent longer, or answers Down, is down."""
    from collections import Counter

    from console.telemetry.core import UNANSWERED_GRACE, LinkEnd, sweep_status

    end = LinkEnd("l1", "spine-01", 1, "leaf-01", 33, "spine", 400.0)
    key = ("spine-01", 1)
    active = {key: PortReading(5, 5, {"SymbolErrorCounter": 2}, "Active")}
    missed: Counter = Counter()
    for _ in range(UNANSWERED_GRACE):
        status = sweep_status([end], {}, active, 1.0, missed)["l1"]
        assert status.up and status.tx_bps == 0
    assert not sweep_status([end], {}, active, 1.0, missed)["l1"].up  # silent too long: down
    # an answer clears the count; an answer of Down is down at once
    assert sweep_status([end], active, active, 1.0, missed)["l1"].up and key not in missed
    down = {key: PortReading(5, 5, {}, "Down")}
    assert not sweep_status([end], down, active, 1.0, missed)["l1"].up
    # without the count (a caller that keeps none) an unanswered port is down, as before
    assert not sweep_status([end], {}, active, 1.0)["l1"].up


def test_link_state_is_read_every_other_sweep_and_every_sweep_for_links_not_active():
    from console.telemetry.core import state_due

    ports = {"leaf1": [1, 2, 3, 4], "spine1": [1, 2]}
    every = {(sw, p) for sw, plist in ports.items() for p in plist}
    assert state_due(ports, {}, 0, 2) is None  # first sweep: every port
    active = {key: PortReading(0, 0, {}, "Active") for key in every}
    assert state_due(ports, active, 5, 1) is None  # every sweep when not staggered
    even, odd = state_due(ports, active, 0, 2), state_due(ports, active, 1, 2)
    assert even | odd == every and not even & odd
    assert len(even) == len(odd) == 3  # each switch's ports spread over both sweeps
    # a port that is down (or did not answer) is read every sweep until it is Active again
    down = dict(active)
    down[("leaf1", 2)] = PortReading(0, 0, {}, "Down")
    del down[("spine1", 1)]
    for sweep in range(4):
        due = state_due(ports, down, sweep, 2)
        assert {("leaf1", 2), ("spine1", 1)} <= due
    # three sweeps in a row: every port was read at least once in any two consecutive ones
    for sweep in range(3):
        assert state_due(ports, active, sweep, 2) | state_due(ports, active, sweep + 1, 2) == every
