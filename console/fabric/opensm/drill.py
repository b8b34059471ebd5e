"""What a subnet-manager failover drill compares: every member port's P_Key table and QoS tables
(SL2VL, the first block of the low and high VL arbitration tables) before and after a takeover,
read over SMPs from the SM host (the MAD helper: one request per table kind, MADs pipelined).

A takeover by a standby with the same files must change nothing on any port: OpenSM programs the
same P_Keys at the same indexes and the same SL-to-VL mapping and arbitration. Any difference is
reported per port.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from console.fabric.diags.mad import MadSession
from console.fabric.diags.runner import DiagRunner

TableRows = dict[str, dict[str, Any]]  # port GUID (hex) → {"lid", "pkeys", "qos"}


def member_guids(desired: Mapping[str, Any]) -> list[int]:
    """The port GUIDs of every member of the desired partitions (the ``ALL`` rule's ports aside:
    only ports named in a partition are the drill's concern)."""
    out: set[int] = set()
    for partition in desired.get("partitions") or []:
        for port, _membership in partition.get("members") or []:
            if isinstance(port, str) and port.startswith("0x"):
                out.add(int(port, 16))
    return sorted(out)


def read_tables(diags: DiagRunner, session: MadSession, guids: Iterable[int]) -> TableRows:
    """Each port's tables as the SM host reads them now (a port off the fabric: ``lid`` None)."""
    topology = diags.ibnetdiscover()
    lids = {
        guid: topology.nodes[nid].lid
        for (nid, _port), guid in topology.port_guids.items()
        if not topology.nodes[nid].is_switch
    }
    wanted = [(g, lids.get(g)) for g in guids]
    present = [(g, lid) for g, lid in wanted if lid]
    pkeys = session.pkeys([(lid, 1) for _, lid in present])
    qos = session.qos_tables([(lid, 1, False, 0) for _, lid in present])
    out: TableRows = {f"{g:#018x}": {"lid": None, "pkeys": None, "qos": None} for g, lid in wanted if not lid}
    for (guid, lid), table, tables in zip(present, pkeys, qos, strict=True):
        entries = None if table is None else sorted([e.index, e.raw] for e in table.entries)
        out[f"{guid:#018x}"] = {"lid": lid, "pkeys": entries, "qos": tables}
    return out


def differences(before: TableRows, after: TableRows) -> list[str]:
    """One line per port whose P_Key or QoS tables differ (or that came or went)."""
    out = []
    for port in sorted(set(before) | set(after)):
        a, b = before.get(port) or {}, after.get(port) or {}
        for what, label in (("lid", "LID"), ("pkeys", "P_Key table"), ("qos", "SL2VL/VLArb tables")):
            if a.get(what) != b.get(what):
                out.append(f"{port}: {label} {_short(a.get(what))} → {_short(b.get(what))}")
    return out


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "…"
