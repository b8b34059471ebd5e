"""Fabric validation's wire tests (designer.imports.health_wire) on the real 582-HCA DGX H100
dump (tests/data, topograph) and a real OSC switch's perfquery output.

The forwarding tables are computed here, independently of the code under test: minimum-hop
routes by breadth-first search over the switch graph read from the dump's text with regular
expressions. Each fault (an entry removed, an entry pointing at an unlinked port, two switches
pointing at each other) is injected into those tables and its expected offender named from them.
"""

from __future__ import annotations

import re
from collections import deque

import pytest

from designer.imports.health_wire import (
    DEFAULT_THRESHOLDS,
    cabling,
    parse_thresholds,
    port_errors,
    routes,
    sm_config,
)
from designer.imports.reader import read_topology
from tests.datafiles import IBNETDISCOVER

DUMP = IBNETDISCOVER / "topograph_dgx_h100_ndr_582ca_40sw.ibnetdiscover"
PERFQUERY = IBNETDISCOVER / "osc_perfquery_switch_0x7cfe9003009ce5b0.out"
THRESHOLDS = IBNETDISCOVER / "rdmacore_error_thresholds"

SWITCH = re.compile(r'^Switch\s+(\d+)\s+"(S-[0-9a-f]+)".*\blid (\d+)')
PORT = re.compile(r'^\[(\d+)\]\s+"([SH]-[0-9a-f]+)"\[(\d+)\](?:\([0-9a-f]+\))?\s+#.*?\blid (\d+)')


class Fabric:
    """The dump's switches, their switch neighbours, and each host LID's leaf port."""

    def __init__(self, text: str) -> None:
        self.links: dict[str, dict[int, str]] = {}
        self.host_at: dict[int, tuple[str, int]] = {}  # host LID → (leaf, port)
        self.nports: dict[str, int] = {}
        switch = None
        for line in text.splitlines():
            if m := SWITCH.match(line):
                switch = m.group(2)
                self.nports[switch] = int(m.group(1))
                self.links[switch] = {}
            elif line.startswith(("Ca", "Rt")):
                switch = None
            elif switch and (m := PORT.match(line)):
                port, peer, lid = int(m.group(1)), m.group(2), int(m.group(4))
                if peer.startswith("S-"):
                    self.links[switch][port] = peer
                else:
                    self.host_at[lid] = (switch, port)

    def min_hop_lfts(self) -> dict[str, list[int]]:
        top = max(self.host_at) + 1
        lfts = {sw: [255] * top for sw in self.links}
        for lid, (leaf, port) in self.host_at.items():
            lfts[leaf][lid] = port
            seen, todo = {leaf}, deque([leaf])
            while todo:
                here = todo.popleft()
                for sw in self.links:
                    if sw in seen:
                        continue
                    toward = [p for p, peer in self.links[sw].items() if peer == here]
                    if toward:
                        lfts[sw][lid] = toward[0]
                        seen.add(sw)
                        todo.append(sw)
        return lfts


@pytest.fixture(scope="module")
def text() -> str:
    return DUMP.read_text()


@pytest.fixture(scope="module")
def fabric(text) -> Fabric:
    return Fabric(text)


@pytest.fixture(scope="module")
def disc(text):
    return read_topology(text)


def test_minimum_hop_tables_route_every_host_pair(disc, fabric):
    assert len(fabric.host_at) == 582
    verdict = routes(disc, fabric.min_hop_lfts())
    assert verdict.ok, verdict.offenders


def test_a_removed_entry_is_caught_at_the_leaf_that_lacks_it(disc, fabric):
    lfts = fabric.min_hop_lfts()
    lid, (leaf, _) = sorted(fabric.host_at.items())[0]
    other_leaf = next(sw for sw in sorted({sw for sw, _ in fabric.host_at.values()}) if sw != leaf)
    lfts[other_leaf][lid] = 255
    verdict = routes(disc, lfts)
    assert verdict.count == 1
    assert f"to LID {lid} " in verdict.offenders[0]
    assert f"({other_leaf}) has no entry for it" in verdict.offenders[0]


def test_an_entry_out_of_an_unlinked_port_is_a_dead_end(disc, fabric):
    lfts = fabric.min_hop_lfts()
    lid, (leaf, _) = sorted(fabric.host_at.items())[-1]
    # another switch sends the LID out a port with no cable
    spine = next(sw for sw in sorted(fabric.links) if sw != leaf)
    used = set(fabric.links[spine]) | {p for s, p in fabric.host_at.values() if s == spine}
    free = next(p for p in range(1, fabric.nports[spine] + 1) if p not in used)
    lfts[spine][lid] = free
    verdict = routes(disc, lfts)
    assert not verdict.ok
    assert all(f"to LID {lid} " in o for o in verdict.offenders)
    assert any(f"({spine}) sends it out port {free}, which leads nowhere (a dead end)" in o for o in verdict.offenders)


def test_two_switches_sending_a_lid_to_each_other_are_a_loop(disc, fabric):
    lfts = fabric.min_hop_lfts()
    lid, (leaf, _) = sorted(fabric.host_at.items())[0]
    other_leaf = next(sw for sw in sorted({sw for sw, _ in fabric.host_at.values()}) if sw != leaf)
    up_port, spine = sorted(fabric.links[other_leaf].items())[0]
    back = next(p for p, peer in fabric.links[spine].items() if peer == other_leaf)
    lfts[other_leaf][lid] = up_port
    lfts[spine][lid] = back
    verdict = routes(disc, lfts)
    assert not verdict.ok
    assert any("a loop through" in o and other_leaf in o and spine in o for o in verdict.offenders)


def test_a_leaf_whose_table_could_not_be_read_is_named(disc, fabric):
    lfts = fabric.min_hop_lfts()
    leaf = sorted({sw for sw, _ in fabric.host_at.values()})[3]
    del lfts[leaf]
    verdict = routes(disc, lfts)
    assert any(f"({leaf}): its forwarding table could not be read" in o for o in verdict.offenders)


def perfquery_errors(path) -> dict[tuple[str, int], dict[str, int]]:
    """perfquery -x output read here: port → its counters (the file's own field names)."""
    out: dict[tuple[str, int], dict[str, int]] = {}
    port = 0
    for line in path.read_text().splitlines():
        name, _, value = line.partition(":")
        value = value.strip(". ")
        if name == "PortSelect":
            port = int(value)
            out[("switch 0x7cfe9003009ce5b0", port)] = {}
        elif port and value.isdigit() and name in DEFAULT_THRESHOLDS:
            out[("switch 0x7cfe9003009ce5b0", port)][name] = int(value)
    return out


def test_the_recorded_switch_passes_and_an_error_burst_over_a_threshold_fails():
    readings = perfquery_errors(PERFQUERY)
    assert len(readings) == 2 and all("SymbolErrorCounter" in c for c in readings.values())
    assert port_errors(readings).ok
    key = sorted(readings)[1]
    readings[key] = {**readings[key], "SymbolErrorCounter": 11, "LinkDownedCounter": 10}
    verdict = port_errors(readings)
    assert verdict.count == 1
    assert verdict.offenders == [f"{key[0]} port {key[1]}: SymbolErrorCounter 11 > 10"]


def test_the_thresholds_file_format():
    # rdma-core's example file: every line commented, so ibqueryerrors' suggested values stand
    assert parse_thresholds(THRESHOLDS.read_text()) == DEFAULT_THRESHOLDS
    assert parse_thresholds("SymbolErrorCounter=0 # strict\n")["SymbolErrorCounter"] == 0
    with pytest.raises(ValueError, match="not a threshold line"):
        parse_thresholds("SymbolErrorCounter: 5\n")


def test_sm_config_and_cabling_verdicts():
    assert sm_config([], {"configured": "ftree", "in_use": "ftree", "fallback": False}).ok
    fallback = sm_config(["smhost2: files differ"], {"configured": "ftree", "in_use": "minhop", "fallback": True})
    assert fallback.offenders == [
        "smhost2: files differ",
        "routing engine ftree configured, minhop in use (a fallback)",
    ]
    doc = {
        "missing": [{"label": "node1[1] — leaf-1[3]"}],
        "extra": [],
        "miswired": [],
        "mismatches": [],
        "fixes": ["x"],
    }
    verdict = cabling(doc)
    assert verdict.offenders == ["missing: node1[1] — leaf-1[3]"] and verdict.fix == "x"
