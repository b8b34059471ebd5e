"""Parsers of infiniband-diags output, against output captured from the lab."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.fabric.diags.parsers import (
    DiagParseError,
    parse_path_records,
    parse_perfquery,
    parse_pkeys,
    parse_portinfo,
    parse_sminfo,
)
from console.fabric.diags.topology import parse_topology
from console.fabric.lab.routing import routing_status_from_log

FIX = Path(__file__).parent / "fixtures"
DIAGS = FIX / "diags"


def read(name: str) -> str:
    return (DIAGS / name).read_text()


def test_pkeys_membership_bit():
    full = parse_pkeys(read("pkeys_full.txt"))
    limited = parse_pkeys(read("pkeys_limited.txt"))
    other = parse_pkeys(read("pkeys_nonmember.txt"))
    assert full.membership(0x0003) == "full"
    assert limited.membership(0x0003) == "limited"
    assert other.membership(0x0003) is None
    assert full.membership(0x7FFF) == "full"
    assert full.capacity == 64 and {e.raw for e in full.entries} == {0xFFFF, 0x8003}


def test_sminfo():
    sm = parse_sminfo(read("sminfo.txt"))
    assert sm.is_master and sm.lid >= 1 and sm.guid == 0x0002C90300002171


def test_portinfo_active_and_down():
    up = parse_portinfo(read("portinfo_active.txt"))
    assert up.is_active and up.width_active == "4X" and up.speed == "2.5 Gbps"
    down = parse_portinfo(read("portinfo_down.txt"))
    assert down.is_down and down.phys_state == "Polling"
    assert parse_portinfo(read("ibportstate_down.txt")).is_down


def test_perfquery_counters():
    basic = parse_perfquery(read("perfquery.txt"))
    assert basic["SymbolErrorCounter"] == 0 and "PortXmitData" in basic.counters
    assert basic.port == 1
    ext = parse_perfquery(read("perfquery_x.txt"))
    assert ext["PortXmitData"] >= 0 and "PortUnicastXmitPkts" in ext.counters


def test_path_records_found_and_not_found():
    found = parse_path_records(read("path_found.txt"))
    assert found.found and found.records[0].pkey == 0x8003
    assert not parse_path_records(read("path_none.txt")).found


def test_parsers_refuse_garbage():
    for parser in (parse_pkeys, parse_sminfo, parse_portinfo, parse_perfquery):
        with pytest.raises(DiagParseError):
            parser("ibwarn: something went wrong\n")


def test_ibnetdiscover_and_net_file_agree_on_the_cabling():
    designed = parse_topology((FIX / "fat_tree_2x4x24.net").read_text())
    discovered = parse_topology(read("ibnetdiscover.txt"))
    assert len(designed.switches()) == 6 and len(designed.cas()) == 24
    assert {(x.a_id, x.a_port, x.b_id, x.b_port) for x in designed.links} == {
        (x.a_id, x.a_port, x.b_id, x.b_port) for x in discovered.links
    }
    assert designed.ca_port_guids() == discovered.ca_port_guids()
    assert designed.by_name("leaf1").node_id == "S-0002c90300001000"
    assert all(n.lid for n in discovered.nodes.values())


def test_routing_fallback_from_real_log_lines():
    text = read("opensm_fallback.log")
    cut = text.index("SUBNET UP")
    during = routing_status_from_log(text[:cut], "ftree")
    assert during.fallback and during.in_use == "minhop"
    assert any("cannot build lid matrices" in e for e in during.evidence)
    after = routing_status_from_log(text, "ftree")
    assert not after.fallback and after.in_use == "ftree"
    assert routing_status_from_log("", "ftree").in_use is None
