"""Reading SL2VL and VLArb tables back from ports and comparing them with the rendered options."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from console.fabric.opensm.qos_table import DEFAULT_TABLE, ClassQos
from console.fabric.opensm.qos_verify import (
    PortRef,
    VlArb,
    compare_port,
    expected_table,
    parse_sl2vl,
    parse_vlarb,
)
from tests.fabric.test_qos_table import table

DIAGS = Path(__file__).parent / "fixtures" / "diags"


def test_parse_sl2vl_and_vlarb_fixtures():
    ca = parse_sl2vl((DIAGS / "smpquery_sl2vl_ca.txt").read_text())
    assert ca == {0: (0, 1, 2) + (0,) * 13}
    switch = parse_sl2vl((DIAGS / "smpquery_sl2vl_switch.txt").read_text())
    assert sorted(switch) == list(range(9)) and set(switch.values()) == {(0, 1, 2) + (0,) * 13}
    arb = parse_vlarb((DIAGS / "smpquery_vlarb_switch.txt").read_text())
    assert arb == VlArb(low=((0, 0x40), (1, 0xC0)) + ((0, 0),) * 6, high=((2, 0x40),) + ((0, 0),) * 7)
    assert parse_vlarb((DIAGS / "smpquery_vlarb_switch0.txt").read_text()) is None


def test_fixture_ports_match_the_default_and_a_changed_table_does_not():
    """The fixtures were read from a lab running the default table."""
    port = PortRef("leaf1", 2, 3, switch=True)
    sl2vl = parse_sl2vl((DIAGS / "smpquery_sl2vl_switch.txt").read_text())
    vlarb = parse_vlarb((DIAGS / "smpquery_vlarb_switch.txt").read_text())
    assert compare_port(port, sl2vl, vlarb, DEFAULT_TABLE.options()) == []
    heavier = table(training={"weight": 128}).options()
    problems = compare_port(port, sl2vl, vlarb, heavier)
    assert problems == [
        "leaf1[3]: VLArb low [(0, 64), (1, 192), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0)] ≠ rendered "
        "[(0, 64), (1, 128), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0)]"
    ]
    moved = replace(DEFAULT_TABLE, classes=(*DEFAULT_TABLE.classes[:2], ClassQos("best-effort", 0, 3, "low", 64)))
    problems = compare_port(port, sl2vl, vlarb, moved.options())
    assert len([p for p in problems if "SL2VL" in p]) == 9  # one per input port
    assert any("VLArb low" in p for p in problems)
    assert compare_port(port, {}, None, DEFAULT_TABLE.options()) == [
        "leaf1[3]: no SL2VL table read back",
        "leaf1[3]: no VL arbitration tables read back",
    ]


def test_expected_table_pads_and_truncates_to_the_ports_capacity():
    assert expected_table([(1, 5), (2, 6)], 3) == ((1, 5), (2, 6), (0, 0))
    assert expected_table([(1, 5), (2, 6)], 1) == ((1, 5),)


def test_mad_helper_decodes_sl2vl_and_vlarb_blocks():
    """The helper's qos op: which SMPs it sends and how it reads their data (IBA 14.2.5.8/9)."""
    from console.fabric.diags.mad_ops import qos_tables
    from console.fabric.diags.mad_wire import ATTR_SL2VL, ATTR_VLARB, SMI_CLASS

    sent: list[tuple[int, int, int, int]] = []
    sl2vl = bytes([0x01, 0x20] + [0x00] * 6)  # SL0→0, SL1→1, SL2→2, the rest → 0
    low = bytes([0x00, 0x40, 0x01, 0xC0] + [0] * 60)
    high = bytes([0x02, 0x40] + [0] * 62)

    def run(queries):
        sent.extend(queries)
        return [{ATTR_SL2VL: sl2vl, ATTR_VLARB: low if q[3] >> 16 == 1 else high}[q[2]] for q in queries]

    switch, ca = qos_tables(run, [[2, 3, 1, 2], [6, 1, 0, 0]])
    assert sent == [
        (SMI_CLASS, 2, ATTR_SL2VL, (0 << 8) | 3),
        (SMI_CLASS, 2, ATTR_SL2VL, (1 << 8) | 3),
        (SMI_CLASS, 2, ATTR_SL2VL, (2 << 8) | 3),
        (SMI_CLASS, 2, ATTR_VLARB, (1 << 16) | 3),
        (SMI_CLASS, 2, ATTR_VLARB, (3 << 16) | 3),
        (SMI_CLASS, 6, ATTR_SL2VL, 0),
        (SMI_CLASS, 6, ATTR_VLARB, 1 << 16),
        (SMI_CLASS, 6, ATTR_VLARB, 3 << 16),
    ]
    assert switch is not None and sorted(switch["sl2vl"]) == ["0", "1", "2"]
    assert switch["sl2vl"]["1"] == [0, 1, 2] + [0] * 13
    assert switch["low"][:3] == [[0, 64], [1, 192], [0, 0]] and len(switch["low"]) == 32
    assert ca is not None and ca["high"][0] == [2, 64] and list(ca["sl2vl"]) == ["0"]
    # the default table reads back equal from such a port, through the verify's comparison
    rows = {int(i): tuple(r) for i, r in switch["sl2vl"].items()}
    arb = VlArb(tuple(map(tuple, switch["low"])), tuple(map(tuple, switch["high"])))
    assert compare_port(PortRef("leaf1", 2, 3, switch=True, nports=2), rows, arb, DEFAULT_TABLE.options()) == []
    # a failed MAD: no answer for that port
    assert qos_tables(lambda qs: [None] * len(qs), [[6, 1, 0, 0]]) == [None]
