"""The SHARP AM input's syntax: port groups and the device configuration, read back."""

from __future__ import annotations

import pytest

from console.fabric.sharp_am import IDLE_GROUP, device_configuration, group_name, parse_port_groups, port_groups


def test_port_groups_round_trip_with_exactly_the_given_guids() -> None:
    trees = {42: [0x0002C90000000002, 0x0002C90000000001, 0x0002C90000000001], 7: [0x10]}
    text = port_groups(trees, idle=[0x30, 0x20])
    assert parse_port_groups(text) == {
        group_name(7): [0x10],
        group_name(42): [0x0002C90000000001, 0x0002C90000000002],
        IDLE_GROUP: [0x20, 0x30],
    }
    assert "    port-guid: 0x0002c90000000001" in text.splitlines()
    assert parse_port_groups(port_groups({1: [0x1]}, idle=[])) == {group_name(1): [0x1]}


def test_device_configuration_disables_sharp_on_idle_switches_only_when_there_are_some() -> None:
    lines = [line.strip() for line in device_configuration([0x20]).splitlines()]
    start = lines.index("port-conf")
    assert lines[start : start + 4] == [
        "port-conf",
        f"port-group-name: {IDLE_GROUP}",
        "sharp-enabled: 0",
        "end-port-conf",
    ]
    assert "port-conf" not in device_configuration([])


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("port-group\n name: a\n", "not ended"),
        ("end-port-group\n", "without a named"),
        ("port-group\n name: a b\nend-port-group\n", "bad port group name"),
        ("port-group\n name: a\nend-port-group\nport-group\n name: a\nend-port-group\n", "twice"),
        ("port-group\n colour: red\nend-port-group\n", "unexpected"),
    ],
)
def test_malformed_port_groups_are_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_port_groups(text)
