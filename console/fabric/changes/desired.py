"""Desired state of a fabric: what it should carry, as canonical JSON, its artefacts and the diff.

Desired state is declarative and complete: the manual ``FabricPartition`` rows, the partitions
the registered providers request (:func:`console.fabric.hooks.requested_partitions`; scheduling
registers its live reservations'), the Default rule, QoS classes (P_Key → SL for every partition
with a non-zero SL), the QoS table (SL→VL and VL arbitration, once QoS is in use) and the wanted ``PortAdminState`` of switch ports. The same JSON is stored on a ChangeRequest and, once
verified, on ``AppliedState``; equal JSON means nothing to push.
"""

from __future__ import annotations

import difflib
from typing import Any

from django.conf import settings

from console.fabric import hooks
from console.fabric.drivers.base import DesiredFabric
from console.fabric.hooks import PartitionRequest
from console.fabric.models import AppliedState, Fabric, FabricPartition, FabricQos, PortAdminState
from console.fabric.opensm.lint import format_guid, parse_guid
from console.fabric.opensm.partitions import DEFAULT_PKEY, PORT_KEYWORDS
from console.fabric.opensm.partitions_file import render_file
from console.fabric.opensm.qos import render_qos_options, render_qos_policy
from console.fabric.opensm.qos_table import DEFAULT_TABLE, QosTable
from console.fabric.opensm.vguids import is_virtual, parse_prefix
from console.tenancy.errors import Conflict

DEFAULT_RULE = {
    "name": "Default",
    "pkey": f"{DEFAULT_PKEY:#06x}",
    "ipoib": True,
    "sl": 0,
    # Hosts limited, the SM's and the switches' management ports full (opensm/partitions.py).
    "members": [["ALL", "limited"], ["ALL_SWITCHES", "full"], ["SELF", "full"]],
    "source": "default",
}


def _canonical_members(members: list[list[str]]) -> list[list[str]]:
    out = []
    for port, membership in members:
        text = str(port).strip()
        if text not in PORT_KEYWORDS:
            guid = parse_guid(text)
            text = format_guid(guid) if guid is not None else text
        out.append([text, str(membership or "full")])
    return sorted(out)


def build_desired(fabric: Fabric) -> dict[str, Any]:
    """The complete desired state of ``fabric`` as canonical JSON.

    Raises :class:`Conflict` when a reservation's partition collides with another one (same
    P_Key or name): pushing either silently would cut someone off.
    """
    partitions: list[dict[str, Any]] = [dict(DEFAULT_RULE)]
    requested = hooks.requested_partitions(fabric.id)
    rows = list(FabricPartition.objects.filter(fabric=fabric).order_by("pkey").prefetch_related("allowed_tenants"))
    for row in rows:
        partitions.append(_row_json(row, requested))
    taken_keys = {p["pkey"]: p["name"] for p in partitions}
    taken_names = {p["name"] for p in partitions}
    for res in requested:
        pkey = f"{int(res['pkey']):#06x}"
        if pkey in taken_keys or res["name"] in taken_names:
            raise Conflict(
                f"reservation {res['reservation_id']} wants P_Key {pkey} ({res['name']}), "
                f"already used by partition {taken_keys.get(pkey, res['name'])!r}",
                fields={"pkey": [pkey]},
            )
        taken_keys[pkey] = res["name"]
        taken_names.add(res["name"])
        partition = {
            "name": res["name"],
            "pkey": pkey,
            "ipoib": False,
            "sl": int(res.get("sl", 0)),
            "members": _canonical_members(res["members"]),
            "source": "reservation",
            "reservation_id": res["reservation_id"],
            "tenant_id": res["tenant_id"],
        }
        if res.get("sharp"):  # only when set: the JSON of other partitions stays as it was
            partition["sharp"] = True
        partitions.append(partition)
    partitions.sort(key=lambda p: (p["pkey"] != DEFAULT_RULE["pkey"], p["pkey"]))
    classes = [[p["pkey"], p["sl"], p["name"]] for p in partitions if p["sl"]]
    port_admin = []
    for a in PortAdminState.objects.filter(fabric=fabric).order_by("switch", "port"):
        port: dict[str, Any] = {"switch": a.switch, "port": a.port, "enabled": a.enabled}
        # Only when set: desired (and applied) JSON of ports without them stays as it was.
        if a.width is not None:
            port["width"] = a.width
        if a.speed is not None:
            port["speed"] = a.speed
        port_admin.append(port)
    qos: dict[str, Any] = {"default_sl": 0, "classes": classes}
    stored = FabricQos.objects.filter(fabric=fabric).values_list("table", flat=True).first()
    if stored is not None or classes:
        # QoS is on (a class SL is in use, or operators saved a table): its VL arbitration too.
        qos["table"] = stored if stored is not None else DEFAULT_TABLE.to_json()
    return {"partitions": partitions, "qos": qos, "port_admin": port_admin}


def _row_json(row: FabricPartition, requested: list[PartitionRequest]) -> dict[str, Any]:
    """A stored partition as desired-state JSON. A service partition's members are its service
    hosts (full) and the hosts of the allowed tenants' reservations (limited); an operator's
    carries its text as written and its members as OpenSM reads them."""
    partition: dict[str, Any] = {
        "name": row.name,
        "pkey": f"{row.pkey:#06x}",
        "ipoib": row.ipoib,
        "sl": row.sl,
        "members": _canonical_members(row.members),
        "source": row.source,
    }
    if row.indx0:  # only when set: the JSON of partitions without it stays as it was
        partition["indx0"] = True
    if row.source == FabricPartition.Source.SERVICE:
        allowed = {t.pk for t in row.allowed_tenants.all()}
        services = {port for port, _ in partition["members"]}
        limited = {
            port
            for res in requested
            if res["tenant_id"] in allowed
            for port, _ in _canonical_members(res["members"])
            if port.startswith("0x") and port not in services
        }
        partition["members"] = sorted(partition["members"] + [[port, "limited"] for port in limited])
        partition["tenants"] = sorted(allowed)
    if row.source == FabricPartition.Source.OPERATOR:
        partition["raw"] = row.raw
        if row.removed:
            partition["removed"] = True
    return partition


def qos_table_of(fabric: Fabric) -> QosTable:
    """The fabric's QoS table (the default when operators never saved one)."""
    stored = FabricQos.objects.filter(fabric=fabric).values_list("table", flat=True).first()
    return QosTable.from_json(stored) if stored is not None else DEFAULT_TABLE


def render_artefacts(desired: dict[str, Any]) -> dict[str, str]:
    """The files (and the port-admin table) the desired state renders to.

    Raises ValueError (with every problem) when the state cannot render lint-clean.
    """
    state = DesiredFabric.from_json(desired)
    artefacts = {"partitions.conf": render_file(state.partitions, operator=state.operator)}
    if state.qos is not None:
        artefacts["qos-policy.conf"] = render_qos_policy(state.qos)
    if state.qos_options is not None:
        options = render_qos_options(state.qos_options)
        artefacts["qos-options"] = "".join(f"{k} {v}\n" for k, v in options.items())
    if state.port_admin:
        lines = [f"{a.label} {a.describe()}" for a in state.port_admin]
        artefacts["port-admin"] = "\n".join(lines) + "\n"
    return artefacts


def diff_artefacts(applied: dict[str, str], desired: dict[str, str]) -> str:
    """Unified diff, file by file, from what is applied to what is desired ('' = no change)."""
    chunks: list[str] = []
    for name in sorted(set(applied) | set(desired)):
        old, new = applied.get(name, ""), desired.get(name, "")
        if old == new:
            continue
        chunks.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=f"applied/{name}",
                tofile=f"desired/{name}",
            )
        )
    return "".join(chunks)


def present_pkeys(desired: dict[str, Any], absent: dict[str, list[str]] | None = None) -> set[int]:
    """The P_Keys a desired state puts on member ports (the Default partition excluded).

    ``absent`` (P_Key → member port GUIDs the verification found off the fabric): a partition
    none of whose end ports is on the fabric is not present anywhere, so it is left out; one
    that lost some of its ports is still present on the others."""
    absent = absent or {}
    present = set()
    for p in desired.get("partitions", []):
        gone = set(absent.get(p["pkey"], ()))
        ports = {port for port, _ in p["members"] if str(port).startswith("0x") and not is_virtual_text(port)}
        if not gone or not ports or ports - gone:
            present.add(int(p["pkey"], 16))
    present.discard(0x7FFF)
    return present


def is_virtual_text(port: str) -> bool:
    """A member GUID in the console's vGUID space (a pod VF: in no port's table)."""
    guid = parse_guid(port)
    return guid is not None and is_virtual(guid, parse_prefix(settings.VGUID_PREFIX))


def applied_of(fabric: Fabric) -> AppliedState | None:
    """The fabric's applied state, if any change was ever verified."""
    return AppliedState.objects.filter(fabric=fabric).first()
