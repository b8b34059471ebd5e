"""Fabrics whose reconciler is paused: after a restore, nothing is pushed until an operator has
seen what the restored desired state would change on the wire and confirmed it.

A backup is older than the wire: reservations made after it hold P_Keys the restored database
does not know. Reconciling at once would strip them. So a restore pauses every fabric
(:func:`pause_all`); a paused fabric creates no change and applies none (its open changes wait),
while reservations can still be made and placed. :func:`review` reads the partitions the master
SM host runs, through its agent, against what the restored state would render; :func:`resume`
(an operator, with ``confirm``) clears the pause, audited with what it will add and remove, and
pushes.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from console.fabric.agents import rpc
from console.fabric.changes.desired import build_desired, diff_artefacts, present_pkeys, render_artefacts
from console.fabric.changes.locks import fabric_for_update
from console.fabric.changes.requests import request_change
from console.fabric.enqueue import enqueue_apply
from console.fabric.models import ChangeRequest, Fabric
from console.fabric.opensm.partitions import DEFAULT_PKEY
from console.fabric.opensm.partitions_file import parse_file
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict
from console.tenancy.models import Principal
from console.tenancy.permissions import require_operator

log = logging.getLogger(__name__)


def pause_all(actor: Actor, reason: str) -> list[str]:
    """Pause every fabric's reconciler (audited, one row per fabric); returns their names."""
    names = []
    with transaction.atomic():
        for fabric in Fabric.objects.select_for_update().order_by("pk"):
            fabric.paused_at, fabric.paused_reason = timezone.now(), reason[:300]
            fabric.save(update_fields=["paused_at", "paused_reason"])
            audit.record(actor, "fabric.paused", fabric, after={"reason": fabric.paused_reason})
            names.append(fabric.name)
    return names


def review(fabric: Fabric) -> dict[str, Any]:
    """What resuming would do: the P_Keys on the wire (the master SM host's partitions file, read
    through its agent) against the restored desired state, and the files' diff."""
    fabric = Fabric.objects.get(pk=fabric.pk)  # its pause as it is now
    desired = build_desired(fabric)
    rendered = render_artefacts(desired)
    wanted = present_pkeys(desired)
    out: dict[str, Any] = {
        "fabric": fabric.name,
        "paused": fabric.paused_at is not None,
        "paused_at": fabric.paused_at.isoformat() if fabric.paused_at else None,
        "reason": fabric.paused_reason,
        "desired_pkeys": _hex(wanted),
        "wire_read": False,
        "wire_pkeys": [],
        "would_add": [],
        "would_remove": [],
        "diff": "",
        "error": "",
    }
    try:
        agent = rpc.agent_for(fabric)
        live = rpc.call(agent, "read_live", {}, timeout=20)["files"]
    except (rpc.AgentLost, rpc.AgentError, KeyError) as exc:
        out["error"] = f"the wire could not be read: {exc}"
        return out
    text = live.get("partitions.conf") or ""
    on_wire = {p.pkey & 0x7FFF for p in parse_file(text, require_default=False)} - {DEFAULT_PKEY} if text else set()
    out.update(
        wire_read=True,
        sm_host=agent.name,
        wire_pkeys=_hex(on_wire),
        would_add=_hex(wanted - on_wire),
        would_remove=_hex(on_wire - wanted),
        diff=diff_artefacts({k: live.get(k) or "" for k in rendered}, rendered)[:20000],
    )
    return out


def resume(actor: Actor, principal: Principal, fabric: Fabric, *, confirm: bool) -> dict[str, Any]:
    """Clear the pause and push the restored state, once an operator confirms what it changes."""
    require_operator(principal, to="resume a fabric's reconciler")
    seen = review(fabric)
    if not seen["paused"]:
        raise Conflict(f"fabric {fabric.name!r} is not paused")
    if not confirm:
        if not seen["wire_read"]:
            raise Conflict(
                f"resuming {fabric.name!r} pushes the restored state, and {seen['error']}: what it would "
                "remove is unknown; confirm only once its SM host's agent is back, or knowingly"
            )
        removing = ", ".join(seen["would_remove"]) or "none"
        raise Conflict(
            f"resuming {fabric.name!r} pushes the restored state (P_Keys removed from the wire: {removing}); "
            "review it and confirm"
        )
    with transaction.atomic():
        fabric = fabric_for_update(fabric.pk)
        before = {"paused_at": seen["paused_at"], "reason": fabric.paused_reason}
        fabric.paused_at, fabric.paused_reason = None, ""
        fabric.save(update_fields=["paused_at", "paused_reason"])
        after = {k: seen[k] for k in ("wire_read", "would_add", "would_remove")}
        audit.record(actor, "fabric.resumed", fabric, before=before, after=after)
        held = (ChangeRequest.Status.QUEUED, ChangeRequest.Status.APPLYING, ChangeRequest.Status.VERIFYING)
        waiting = list(fabric.changes.filter(status__in=held).values_list("pk", flat=True))
        for change_id in waiting:  # changes the pause held
            enqueue_apply(change_id)
    # The restored state is pushed even where the console's applied state already matches it: the
    # wire may carry P_Keys of reservations made after the backup, which the restored console
    # does not know of and whose verification would not miss them.
    change = request_change(actor, principal, fabric, reason="resume after a restore")
    return {**seen, "change": change.pk, "held_changes": waiting}


def _hex(pkeys: set[int]) -> list[str]:
    return [f"{p:#06x}" for p in sorted(pkeys)]
