"""Partitions the console found on an SM host and did not write: adopted as operator-owned.

A push keeps every partition of the live ``partitions.conf`` that the console did not write
(:func:`console.fabric.opensm.partitions_file.hand_written`) and reports them; the pipeline
adopts them here, in the transaction that writes the change's outcome, so the console lists
them, audits them and keeps them on every later push (rendered exactly as written). An operator
edits or deletes them in the console; a deletion is a tombstone (``removed``) until a verified
push has dropped the partition from the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from console.fabric.models import Fabric, FabricPartition
from console.fabric.opensm.lint import format_guid
from console.fabric.opensm.partitions_file import OperatorPartition
from console.fabric.opensm.partitions_live import as_partitions, read_live
from console.tenancy import audit
from console.tenancy.context import Actor

Source = FabricPartition.Source


def members_of(raw: str) -> list[list[str]]:
    """The members of an operator partition as OpenSM reads its text (canonical JSON)."""
    out: list[list[str]] = []
    for partition in as_partitions(read_live(raw).statements):
        for m in partition.members:
            port = m.port if isinstance(m.port, str) else format_guid(m.port)
            out.append([port, partition.effective_membership(m).value])
    return sorted(out)


def _free_name(fabric: Fabric, wanted: str, pkey: int) -> str:
    name = re.sub(r"[^A-Za-z0-9_.\-]", "-", wanted)[:56].strip("-") or f"pkey-{pkey:04x}"
    if FabricPartition.objects.filter(fabric=fabric, name=name).exists():
        name = f"{name[:50]}-{pkey:04x}"
    return name


def adopt_operator_partitions(fabric: Fabric, found: Sequence[OperatorPartition], actor: Actor) -> list[str]:
    """Record ``found`` as operator-owned partitions of ``fabric`` (new ones created, changed
    text updated), each audited; returns what was done, one line each. Inside the caller's
    transaction."""
    done = []
    for op in found:
        row = FabricPartition.objects.filter(fabric=fabric, pkey=op.pkey).first()
        if row is None:
            row = FabricPartition.objects.create(
                fabric=fabric,
                name=_free_name(fabric, op.name, op.pkey),
                pkey=op.pkey,
                source=Source.OPERATOR,
                raw=op.raw,
                members=members_of(op.raw),
                description="found on the SM host",
            )
            audit.record(actor, "fabric.partition.adopt", row, after=audit.snapshot(row))
            done.append(f"adopted {row.name} ({op.pkey:#06x})")
        elif row.source == Source.OPERATOR and row.raw != op.raw and not row.removed:
            before = audit.snapshot(row)
            row.raw, row.members = op.raw, members_of(op.raw)
            row.save(update_fields=["raw", "members", "updated_at"])
            audit.record(actor, "fabric.partition.adopt", row, before=before, after=audit.snapshot(row))
            done.append(f"updated {row.name} ({op.pkey:#06x}) as edited on the SM host")
    return done


def forget_dropped(fabric_id: int, desired: Mapping[str, Any], actor: Actor) -> None:
    """Delete the tombstones of operator partitions a verified push has dropped from the file."""
    dropped = [int(p["pkey"], 16) for p in desired.get("partitions", []) if p.get("removed")]
    for row in FabricPartition.objects.filter(
        fabric_id=fabric_id, source=Source.OPERATOR, removed=True, pkey__in=dropped
    ):
        audit.record(actor, "fabric.partition.dropped", row, before=audit.snapshot(row))
        row.delete()
