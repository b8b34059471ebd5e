"""The collector's MAD reader on the real lab (OpenSM on ibsim, the hand-written fat tree of
tests/fabric: 2 spines, 4 leaves, 24 HCAs): error counters read per port only where a switch's
AllPortSelect sums moved, link state every other sweep, and the same answers as the reader that
reads everything one MAD at a time."""

from __future__ import annotations

import time

import pytest

from console.telemetry.core import link_status, state_due
from console.telemetry.linkmap import LinkEnd
from console.telemetry.readers import MadReader
from tests.fabric.conftest import net_text, requires_lab, start_lab  # noqa: F401 (fixtures)

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(180)]


@pytest.fixture
def fabric(start_lab):  # noqa: F811
    """(lab, switch → ports, switch → LID): every cabled switch port (HCAs 1-6, uplinks)."""
    lab = start_lab("reader")
    topo = lab.diags().ibnetdiscover()
    lids = {n.description: n.lid for n in topo.switches()}
    ports = {sw: list(range(1, 7 if sw.startswith("leaf") else 5)) for sw in lids}
    for sw in lids:
        if sw.startswith("leaf"):
            ports[sw] += [7, 8]
    return lab, ports, lids


def every_port(ports) -> set[tuple[str, int]]:
    return {(sw, p) for sw, plist in ports.items() for p in plist}


def test_only_switches_whose_error_sums_moved_have_their_ports_error_counters_read(fabric):
    lab, ports, lids = fabric
    reader = MadReader(lab.diag_env())
    full = MadReader(lab.diag_env(), mode="sync", error_sums=False)
    try:
        first = reader.read(ports, lids)
        n = len(every_port(ports))
        assert len(first) == n and reader.last["errors_read"] == n
        assert reader.last["mode"] == "pipelined"
        quiet = reader.read(ports, lids)
        assert reader.last["errors_read"] == 0 and reader.last["dirty_switches"] == 0
        # one PortCounters(AllPortSelect) per switch + data and state of every port
        assert reader.last["mads"] == len(lids) + 2 * n
        assert {k: r.errors for k, r in quiet.items()} == {k: r.errors for k, r in first.items()}

        lab.set_counter("leaf2", 3, SymbolErrorCounter=7, PortRcvErrors=2)
        moved = reader.read(ports, lids)
        assert reader.last["dirty_switches"] == 1
        assert reader.last["errors_read"] == len(ports["leaf2"])
        assert moved[("leaf2", 3)].errors["SymbolErrorCounter"] == 7
        end = LinkEnd("leaf2/3", "leaf2", 3, "hca", 1, "node_leaf", 400.0)
        delta = link_status(end, moved[("leaf2", 3)], quiet[("leaf2", 3)], 1.0).errors
        assert delta == {
            "SymbolErrorCounter": 7,
            "LinkDownedCounter": 0,
            "LinkErrorRecoveryCounter": 0,
            "PortRcvErrors": 2,
            "PortXmitDiscards": 0,
        }
        # what it did not re-read is what a reader reading everything sees
        truth = full.read(ports, lids)
        assert {k: (r.errors, r.state) for k, r in moved.items()} == {k: (r.errors, r.state) for k, r in truth.items()}
        reader.read(ports, lids)
        assert reader.last["dirty_switches"] == 0 and reader.last["errors_read"] == 0
    finally:
        reader.close()
        full.close()


def test_congestion_and_link_error_recovery_set_in_ibsim_are_read_as_a_rate_and_an_error(fabric):
    """PortXmitWait and LinkErrorRecoveryCounter set on one ibsim port move the switch's
    AllPortSelect sums, so that port's counters are read again: the wait as ticks per second
    (never an error), the recoveries as an error delta."""
    lab, ports, lids = fabric
    reader = MadReader(lab.diag_env())
    try:
        before = reader.read(ports, lids)
        assert before[("leaf3", 2)].errors["PortXmitWait"] == 0
        lab.set_counter("leaf3", 2, PortXmitWait=50_000, LinkErrorRecoveryCounter=3)
        after = reader.read(ports, lids)
        assert reader.last["dirty_switches"] == 1
        assert after[("leaf3", 2)].errors["PortXmitWait"] == 50_000
        end = LinkEnd("leaf3/2", "leaf3", 2, "hca", 1, "node_leaf", 400.0)
        status = link_status(end, after[("leaf3", 2)], before[("leaf3", 2)], 2.0)
        assert status.xmit_wait == 25_000.0
        assert status.errors["LinkErrorRecoveryCounter"] == 3
        assert "PortXmitWait" not in status.errors
        shown = status.as_dict()
        assert shown["xmit_wait"] == 25_000 and shown["error_totals"] == {"LinkErrorRecoveryCounter": 3}
        quiet = link_status(end, reader.read(ports, lids)[("leaf3", 2)], after[("leaf3", 2)], 1.0)
        assert quiet.xmit_wait == 0.0
    finally:
        reader.close()


def test_link_state_is_read_every_other_sweep_and_a_pulled_cable_shows_within_two(fabric):
    lab, ports, lids = fabric
    reader = MadReader(lab.diag_env())
    try:
        prev = reader.read(ports, lids, state=state_due(ports, {}, 0, 2))
        n = len(every_port(ports))
        assert reader.last["states_read"] == n
        sweep = 1
        prev = reader.read(ports, lids, state=state_due(ports, prev, sweep, 2))
        assert reader.last["states_read"] == n // 2
        lab.unplug("leaf3", 2)
        seen_down = None
        for sweep in range(2, 4):
            prev = reader.read(ports, lids, state=state_due(ports, prev, sweep, 2))
            if prev[("leaf3", 2)].state == "Down":
                seen_down = sweep
                break
        assert seen_down is not None, "a pulled cable must show within two sweeps"
        # a link that is not Active is read every sweep until it is
        lab.replug("leaf3", 2)
        deadline = time.monotonic() + 30
        while prev[("leaf3", 2)].state != "Active" and time.monotonic() < deadline:
            sweep += 1
            due = state_due(ports, prev, sweep, 2)
            assert ("leaf3", 2) in due
            prev = reader.read(ports, lids, state=due)
            time.sleep(0.2)
        assert prev[("leaf3", 2)].state == "Active"
        assert {r.state for k, r in prev.items()} == {"Active"}
    finally:
        reader.close()


def test_reading_in_parts_streams_the_answers_of_one_read(fabric):
    lab, ports, lids = fabric
    reader = MadReader(lab.diag_env())
    try:
        whole = reader.read(ports, lids)
        parts = [{sw: ports[sw]} for sw in ports]
        sums = reader.begin_sweep(ports, lids)
        got = {}
        for part, readings in zip(parts, reader.read_parts(parts, lids, sums=sums), strict=True):
            assert set(readings) == every_port(part)
            assert reader.last["ports"] == len(readings) and reader.last["mads"] > 0
            got.update(readings)
        assert {k: (r.errors, r.state) for k, r in got.items()} == {k: (r.errors, r.state) for k, r in whole.items()}
        assert all(got[k].xmit_words >= whole[k].xmit_words for k in whole)
        assert reader.session.starts == 1  # one helper, nothing killed
    finally:
        reader.close()


def test_with_the_sums_asked_ahead_a_sweep_is_one_exchange_and_no_error_is_missed(fabric):
    """``sums_ahead`` (the reader over an SM host's agent): the next sweep's AllPortSelect sums
    end this sweep's stream. A counter set between two sweeps is read, exactly, by the sweep
    after next at the latest, and a quiet fabric has no port's errors read."""
    lab, ports, lids = fabric
    reader = MadReader(lab.diag_env(), sums_ahead=True)
    full = MadReader(lab.diag_env(), mode="sync", error_sums=False)
    n = len(every_port(ports))
    asked: list[int] = []
    stream = reader.session.stream

    def counting(requests, **kw):
        requests = list(requests)
        asked.append(len(requests))
        return stream(requests, **kw)

    reader.session.stream = counting
    try:
        reader.read(ports, lids)
        assert reader.last["errors_read"] == n
        asked.clear()
        for _ in range(2):
            reader.read(ports, lids)
            assert reader.last["errors_read"] == 0 and reader.last["dirty_switches"] == 0
            # the sums of this sweep came with the last one, and it still counts them
            assert reader.last["mads"] == len(lids) + 2 * n
        assert asked == [2, 2]  # one exchange a sweep: the part and the next sweep's sums
        lab.set_counter("leaf1", 4, PortXmitDiscards=5, LinkDownedCounter=1)
        seen = [reader.read(ports, lids)[("leaf1", 4)].errors for _ in range(2)]
        assert seen[-1]["PortXmitDiscards"] == 5 and seen[-1]["LinkDownedCounter"] == 1
        truth = full.read(ports, lids)
        now = reader.read(ports, lids)
        assert {k: r.errors for k, r in now.items()} == {k: r.errors for k, r in truth.items()}
        assert reader.last["errors_read"] == 0  # read once, then quiet again
    finally:
        reader.close()
        full.close()
