"""The MAD helper (console.fabric.diags.madworker) and its client MadSession, on a real small lab,
and the push engine's use of it (LID map reuse, fallback to smpquery)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from console.fabric.diags import mad as mad_module
from console.fabric.diags.mad import MadSession, MadTimeout, MadUnavailable
from console.fabric.diags.runner import DiagEnv, DiagError
from console.fabric.lab.manager import Lab
from console.fabric.opensm import pkey_tables
from console.fabric.opensm.partitions import Member, Partition
from console.fabric.opensm.push import PushOptions, push_partitions
from tests.fabric.conftest import requires_lab

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(180)]


def hca_guids(lab: Lab) -> dict[str, int]:
    return {n.description: n.guid + 1 for n in lab.topology.cas()}


def reservation(lab: Lab, pkey: int = 0x0003) -> Partition:
    g = hca_guids(lab)
    members = [Member(g[f"hca{i:02d}"], "limited" if i % 4 == 0 else "full") for i in range(1, 17)]
    return Partition("resv1", pkey, members=members)


def assert_indexes_are_the_wires(lab: Lab, result, partition: Partition) -> None:
    """The verify step recorded, for every member port, the index smpquery shows the key at."""
    recorded = result.pkey_indexes[f"{partition.pkey:#06x}"]
    lids = lab.port_lids()
    diags = lab.diags(timeout=20)
    for m in partition.members:
        (wire,) = [e.index for e in diags.pkeys(lids[m.port][0]).entries if e.pkey == partition.pkey]
        assert recorded[f"{m.port:#018x}"] == wire, hex(m.port)
    assert len(recorded) == len(partition.members)


@pytest.fixture
def lab(start_lab) -> Lab:
    return start_lab("mad")


def test_pkeys_op_matches_smpquery_on_every_port(lab):
    assert push_partitions(lab, [reservation(lab)]).ok
    topo = lab.diags().ibnetdiscover()
    cas = sorted((n for n in topo.nodes.values() if not n.is_switch), key=lambda n: n.lid)
    switch = next(n for n in topo.nodes.values() if n.is_switch)
    with MadSession(lab.diag_env()) as mad:
        tables = mad.pkeys([(n.lid, 1) for n in cas] + [(switch.lid, 1), (999, 1)])
        assert tables[-1] is None  # no such LID: no answer, not an empty table
        diags = lab.diags()
        for node, table in zip(cas, tables, strict=False):
            assert table is not None
            assert table.pkeys() == diags.pkeys(node.lid).pkeys(), node.description
        assert tables[-2].pkeys() == diags.pkeys(switch.lid, 1).pkeys()
        by_name = {n.description: t for n, t in zip(cas, tables, strict=False)}
        assert by_name["hca01"].membership(0x0003) == "full"
        assert 0x8003 in {e.raw for e in by_name["hca01"].entries}
        assert by_name["hca04"].membership(0x0003) == "limited"
        assert by_name["hca20"].membership(0x0003) is None
        # Isolation by default: a host is a limited member of the Default partition, the SM's
        # port (hca24 in this lab) a full one.
        assert by_name["hca20"].membership(0x7FFF) == "limited"
        assert by_name["hca24"].membership(0x7FFF) == "full"
        # Reading every block the port has (PartitionCap 64 in ibsim: 2 blocks) changes nothing.
        two = mad.pkeys([(cas[0].lid, 1)], blocks=[2])[0]
        assert two is not None and two.pkeys() == tables[0].pkeys()


def test_nodeinfo_portinfo_and_sminfo(lab):
    topo = lab.diags().ibnetdiscover()
    ca_ports = {
        guid: (topo.nodes[nid].lid, port)
        for (nid, port), guid in topo.port_guids.items()
        if not topo.nodes[nid].is_switch
    }
    assert lab.port_lids() == ca_ports  # written when the lab came up
    guid, (lid, port) = sorted(ca_ports.items())[0]
    sm = lab.diags().sminfo()
    with MadSession(lab.diag_env()) as mad:
        info = mad.nodeinfo([lid, 999])
        assert info[0]["port_guid"] == guid and info[0]["type"] == "CA"
        assert info[0]["partition_cap"] == 64 and info[1] is None
        state = mad.portinfo([(lid, port)])[0]
        assert state["lid"] == lid and state["link_state"] == "Active"
        first, second = mad.sminfo(sm.lid), mad.sminfo(sm.lid)
        assert first["state"] == "MASTER" and first["guid"] == sm.guid
        assert second["act_count"] > first["act_count"]


def test_session_times_out_restarts_and_closes(lab):
    with MadSession(lab.diag_env(), timeout=5) as mad:
        assert mad.ping() < 5 and mad.starts == 1
        pid = mad.proc.pid
        lid, port = next(iter(lab.port_lids().values()))
        # 200,000 SMPs take ibsim seconds even pipelined: far beyond a 0.2 s deadline.
        with pytest.raises(MadTimeout, match="killed"):
            mad.pkeys([(lid, port)] * 100_000, blocks=[2] * 100_000, timeout=0.2)
        assert not mad.alive
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)
        assert mad.pkeys([(lid, port)])[0] is not None  # a fresh helper
        assert mad.starts == 2
        os.kill(mad.proc.pid, 9)  # the helper dies between requests
        mad.proc.wait(5)
        assert mad.pkeys([(lid, port)])[0] is not None
        assert mad.starts == 3
        pid = mad.proc.pid
    assert mad.proc is None
    assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def test_a_stream_sends_ahead_and_answers_in_order(lab):
    ports = _switch_ports(lab)
    parts = [ports[i::3] for i in range(3)]
    with MadSession(lab.diag_env()) as mad:
        requests = [{"op": "ping"}] * 20
        requests += [{"op": "counters", "ports": [[lid, port, 4] for lid, port in part]} for part in parts]
        got = []
        for data in mad.stream(requests, depth=4):
            got.append(data)
            time.sleep(0.01)  # the helper answers ahead meanwhile: several lines arrive at once
        assert got[:20] == ["pong"] * 20
        assert [len(rows) for rows in got[20:]] == [len(part) for part in parts]
        assert {row[3] for rows in got[20:] for row in rows} == {"Active"}
        assert mad.starts == 1
        # a caller that stops early leaves answers unread: the helper is replaced
        stream = mad.stream([{"op": "ping"}] * 5)
        assert next(stream) == "pong"
        stream.close()
        assert not mad.alive
        assert mad.ping() >= 0 and mad.starts == 2


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_session_unavailable_without_a_umad_port(tmp_path):
    if Path("/sys/class/infiniband").exists():
        pytest.skip("this host has a real HCA")
    with pytest.raises(MadUnavailable), MadSession(DiagEnv(), start_timeout=10) as mad:
        mad.ping()


def test_lab_reports_the_end_of_opensm_sweeps(lab):
    mark = lab.sweep_mark()
    assert not lab.swept_since(mark)
    lab.reload()
    deadline = time.monotonic() + 15
    while not lab.swept_since(mark) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lab.swept_since(mark)


def test_push_reuses_lids_and_waits_for_the_sweep(lab):
    result = push_partitions(lab, [reservation(lab)])
    assert result.outcome == "verified", result.mismatches
    assert_indexes_are_the_wires(lab, result, reservation(lab))
    log = result.step("verify").log
    # 16 members + 4 sampled outsiders, each also checked for its Default membership, and the
    # SM's port (full in the Default partition).
    assert log[0] == "41 port checks on 21 ports"
    assert "LIDs: lab; P_Key tables via the MAD helper" in log
    assert not any(line.startswith("ibnetdiscover") for line in log)
    released = push_partitions(lab, [])
    assert released.outcome == "verified", released.mismatches
    assert "LIDs: lab; P_Key tables via the MAD helper" in released.step("verify").log


def test_push_rediscovers_when_the_lid_map_is_wrong(lab, monkeypatch):
    lids = lab.port_lids()
    guids = sorted(lids)
    swapped = dict(lids)
    for a, b in zip(guids[::2], guids[1::2], strict=False):  # every LID names another port
        swapped[a], swapped[b] = lids[b], lids[a]
    monkeypatch.setattr(lab, "port_lids", lambda: swapped)
    pkey_tables.cache_lids(mad_module.env_key(lab.diag_env()), None)
    result = push_partitions(lab, [reservation(lab)])
    assert result.outcome == "verified", result.mismatches
    log = result.step("verify").log
    assert any("rediscovering" in line for line in log), log
    assert any(line.startswith("ibnetdiscover:") for line in log), log
    # The fresh map is cached for the next push of this fabric.
    again = push_partitions(lab, [])
    assert "LIDs: cached; P_Key tables via the MAD helper" in again.step("verify").log


def test_push_falls_back_to_smpquery_without_the_helper(lab, monkeypatch):
    monkeypatch.setattr(mad_module, "MODULE", "console.fabric.diags.no_such_helper")
    mad_module.close_shared()
    result = push_partitions(lab, [reservation(lab)])
    assert result.outcome == "verified", result.mismatches
    assert_indexes_are_the_wires(lab, result, reservation(lab))
    log = result.step("verify").log
    assert any("MAD helper unavailable" in line for line in log), log
    assert "LIDs: ibnetdiscover; P_Key tables via smpquery" in log
    forced = push_partitions(lab, [], PushOptions(use_mad=False))
    assert forced.outcome == "verified", forced.mismatches
    assert "LIDs: ibnetdiscover; P_Key tables via smpquery" in forced.step("verify").log
    mad_module.close_shared()


def _switch_ports(lab: Lab) -> list[tuple[int, int]]:
    """(LID, port) of every cabled switch port."""
    topo = lab.diags().ibnetdiscover()
    cabled = {
        (topo.nodes[node].lid, port)
        for link in topo.links
        for node, port in ((link.a_id, link.a_port), (link.b_id, link.b_port))
        if topo.nodes[node].is_switch
    }
    return sorted(cabled)


def test_pipelined_answers_equal_synchronous_answers(lab):
    assert push_partitions(lab, [reservation(lab)]).ok
    topo = lab.diags().ibnetdiscover()
    ports = _switch_ports(lab)
    ca_lids = sorted(n.lid for n in topo.nodes.values() if not n.is_switch)
    switch = min(n.lid for n in topo.switches())
    top = max(n.lid for n in topo.nodes.values())
    answers = {}
    with MadSession(lab.diag_env()) as mad:
        assert mad.ping() >= 0 and mad.pipelined  # libibumad is there: the helper pipelines
        assert mad.native  # in madpipe.c's loop (scripts/bootstrap.sh builds it)
        for mode in ("sync", "pipelined"):
            mad.mode = mode
            answers[mode] = {
                "counters": mad.counters(ports + [(switch, 255)]),
                "portinfo": mad.portinfo(ports),
                "nodeinfo": mad.nodeinfo(ca_lids + [switch]),
                "pkeys": [t.pkeys() for t in mad.pkeys([(lid, 1) for lid in ca_lids])],
                "lft": mad.lft(switch, top),
            }
            assert mad.last_stats["mode"] == mode
        python_loop = mad.counters(ports + [(switch, 255)], native=False)
        assert mad.last_stats["mode"] == "pipelined" and not mad.last_stats["native"]
    sync, pipe = answers["sync"], answers["pipelined"]
    assert [row[2:] for row in python_loop] == [row[2:] for row in pipe["counters"]]
    assert len(sync["counters"]) == len(ports) + 1 and all(sync["counters"])
    for a, b in zip(sync["counters"], pipe["counters"], strict=True):
        # errors and state are equal; data counters only grow (the MADs themselves cross links)
        assert a[2:] == b[2:]
        assert b[0] >= a[0] and b[1] >= a[1]
    assert {row[3] for row in sync["counters"][:-1]} == {"Active"}
    for op in ("portinfo", "nodeinfo", "pkeys", "lft"):
        assert sync[op] == pipe[op], op
    assert any(0x0003 in keys for keys in sync["pkeys"]) and len(sync["lft"]) == top + 1


def test_a_dead_lid_is_null_and_the_rest_is_answered(lab):
    ports = _switch_ports(lab)
    dead = [(999, 1), (998, 3)]
    mixed = ports[:10] + dead[:1] + ports[10:] + dead[1:]
    with MadSession(lab.diag_env()) as mad:
        rows = mad.counters(mixed, mad_timeout_ms=100, retries=1)
        stats = mad.last_stats
        assert stats["mode"] == "pipelined"
        for (lid, _), row in zip(mixed, rows, strict=True):
            assert (row is None) == (lid in (998, 999))
        assert stats["failed"] == 3 * len(dead)  # each dead port: data, errors, state
        assert stats["mads"] == 3 * len(mixed) + stats["retried"]
        mad.mode = "sync"
        info = mad.portinfo([(999, 1)] + ports[:2])
        assert info[0] is None and info[1]["link_state"] == "Active"


def test_counters_read_only_what_the_mask_asks_for(lab):
    ports = _switch_ports(lab)[:4]
    with MadSession(lab.diag_env()) as mad:
        rows = mad.counters(ports, masks=[1, 2, 4, 7])
        assert mad.last_stats["mads"] == 1 + 1 + 1 + 3
        data, errors, state, every = rows
        assert data[0] is not None and data[2] is None and data[3] is None
        assert errors[0] is None and set(errors[2]) >= {"SymbolErrorCounter", "PortRcvErrors"}
        assert state[:3] == [None, None, None] and state[3] == "Active"
        assert every[0] is not None and every[2] and every[3] == "Active"


def test_slots_of_helpers_killed_without_a_goodbye_are_reaped(lab):
    """ibsim has ten client slots and keeps the slot of a client killed with SIGKILL: once they
    are all taken every diag fails to attach, until the lab disconnects the dead ones."""
    from console.fabric.lab.ibsim_console import attached

    lids = lab.port_lids()
    lid = next(iter(lids.values()))[0]
    with MadSession(lab.diag_env()) as live:
        assert live.ping()
        killed = []
        for _ in range(10):  # more than the slots left: OpenSM and the live helper hold two
            session = MadSession(lab.diag_env(), start_timeout=5)
            try:
                session.start()
            except MadUnavailable:
                break  # no slot left
            assert session.proc is not None
            killed.append(session.proc.pid)
            session.proc.kill()
            session.proc.wait()
        held = {pid for _, pid in attached(lab.workdir)}
        assert set(killed) <= held and live.proc is not None and live.proc.pid in held
        with pytest.raises(DiagError, match="connect failed"):
            lab.diags(timeout=20).pkeys(lid)

        assert sorted(lab.reap_dead_clients()) == sorted(killed)
        assert {pid for _, pid in attached(lab.workdir)} == held - set(killed)
        assert lab.diags(timeout=20).pkeys(lid).pkeys()  # attaches again
        assert live.ping()  # the live helper kept its slot
