"""SHARP Aggregation Manager input for plain OpenSM hosts: the allocated trees' switches.

On a host running NVIDIA's OpenSM with ``sharp_am``, SHARP's documentation ("Disabling SHARP on
Specific Network Devices in OpenSM", SHARP release 3.x) names two OpenSM inputs: a port-groups
file (``pgrp_policy_file`` in the OpenSM configuration) and a device configuration file
(``device_configuration_file``) whose ``port-conf`` blocks set ``sharp-enabled`` per port group::

    port-group
        name: NON_SHARP_SWITCHES
        port-guid: 0x0002c90000000001
    end-port-group

    port-conf
        port-group-name: NON_SHARP_SWITCHES
        sharp-enabled: 0
    end-port-conf

The console renders, from the reservations' SHARP allocations: one port group per reservation
holding a tree (``ibc_sharp_res_<id>``: exactly the node GUIDs of its tree's switches), and
``IBC_SHARP_IDLE`` (the SHARP-capable switches no reservation's tree uses) with SHARP disabled,
so ``sharp_am`` builds trees only on switches the console allocated. The console does not run
``sharp_am`` and does not push these files (docs/operations.md, "SHARP"); pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

#: The port group of the SHARP-capable switches no allocated tree uses.
IDLE_GROUP = "IBC_SHARP_IDLE"
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def group_name(reservation_id: int) -> str:
    """The port group of a reservation's tree."""
    return f"ibc_sharp_res_{reservation_id}"


def _group(name: str, guids: Iterable[int]) -> list[str]:
    if not _NAME.match(name):
        raise ValueError(f"port group name {name!r}: letters, digits and underscores only")
    lines = ["port-group", f"    name: {name}"]
    lines += [f"    port-guid: 0x{guid:016x}" for guid in sorted(set(guids))]
    return [*lines, "end-port-group", ""]


def port_groups(trees: Mapping[int, Iterable[int]], idle: Iterable[int]) -> str:
    """The ``pgrp_policy_file``: one group per reservation (id → its tree's switch node GUIDs),
    then :data:`IDLE_GROUP` (omitted when every SHARP-capable switch is in a tree)."""
    lines: list[str] = ["# ib-console: SHARP trees allocated to reservations (sharp_am reads them through OpenSM)"]
    for reservation_id in sorted(trees):
        lines += _group(group_name(reservation_id), trees[reservation_id])
    idle_guids = sorted(set(idle))
    if idle_guids:
        lines += _group(IDLE_GROUP, idle_guids)
    return "\n".join(lines)


def device_configuration(idle: Iterable[int]) -> str:
    """The ``device_configuration_file``: SHARP disabled on :data:`IDLE_GROUP` (empty body
    when no switch is idle)."""
    lines = ["# ib-console: SHARP only on switches of allocated trees"]
    if set(idle):
        lines += ["port-conf", f"    port-group-name: {IDLE_GROUP}", "    sharp-enabled: 0", "end-port-conf", ""]
    return "\n".join(lines)


def parse_port_groups(text: str) -> dict[str, list[int]]:
    """Read a port-groups file back (name → GUIDs); raises ``ValueError`` on a malformed one
    (the syntax check the tests apply, and what an operator can run on an edited file)."""
    groups: dict[str, list[int]] = {}
    current: str | None = None
    guids: list[int] = []
    inside = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line == "port-group":
            if inside:
                raise ValueError(f"line {number}: port-group inside a port-group")
            inside, current, guids = True, None, []
        elif line == "end-port-group":
            if not inside or current is None:
                raise ValueError(f"line {number}: end-port-group without a named port-group")
            if current in groups:
                raise ValueError(f"line {number}: port group {current!r} twice")
            groups[current] = guids
            inside = False
        elif inside and line.startswith("name:"):
            current = line.removeprefix("name:").strip()
            if not _NAME.match(current):
                raise ValueError(f"line {number}: bad port group name {current!r}")
        elif inside and line.startswith("port-guid:"):
            guids.append(int(line.removeprefix("port-guid:").strip(), 16))
        else:
            raise ValueError(f"line {number}: unexpected {line!r}")
    if inside:
        raise ValueError("port-group not ended")
    return groups
