"""A reservation's history as a timeline: requested → queued (why) → placed → pushed → verified
→ ready → released, each with its time, and the fabric faults that touched it (a link down, a
port isolated, an SM lost: what the console told the tenant's webhooks, and did).

Read from what was recorded anyway: the reservation's audit entries (each step of its life is an
audited mutation) and the fabric change that carried its partition (pushed when the change
started on the fabric, verified when it was applied, i.e. verified on the ports). Who did what is
left out: a tenant reads the steps of its own reservation, never the names of the operators or
workers that moved it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from console.fabric.models import ChangeRequest
from console.notify.models import Event
from console.tenancy.models import AuditEntry
from scheduling.models import Reservation

#: Audited action → the step it is, in words.
STEPS = {
    "reservation.create": "requested",
    "reservation.queue": "queued",
    "reservation.place": "placed",
    "reservation.reject": "refused",
    "reservation.ready": "ready",
    "reservation.extend": "extended",
    "reservation.release": "release asked",
    "reservation.released": "released",
    "reservation.cancel": "cancelled",
    "reservation.preempt": "preempted",
    "reservation.expire": "ended",
    "reservation.fabric_failed": "failed on the fabric",
}
#: Steps whose audit entry carries the reason (in its ``after`` snapshot).
WITH_REASON = {"reservation.reject", "reservation.preempt", "reservation.fabric_failed"}
#: Statuses a request created in had been placed already (granted at once).
PLACED_AT_ONCE = {"placed", "provisioning", "ready"}


@dataclass(frozen=True)
class Step:
    """One step: ``step`` in words, when (UTC), and a detail (why it waits, why it failed)."""

    step: str
    at: dt.datetime
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "at": self.at.isoformat(), "detail": self.detail}


def timeline(reservation: Reservation, change: ChangeRequest | None) -> list[Step]:
    """The reservation's steps, oldest first: its audit entries (one query) and ``change``, the
    change that carried its partition (:func:`console.fabric.filtersets.carrying_change`, which
    the reservation page reads anyway)."""
    steps = [Step("requested", reservation.created_at)]
    entries = (
        AuditEntry.objects.filter(
            object_type=Reservation._meta.label_lower, object_id=str(reservation.pk), action__in=STEPS
        )
        .order_by("created_at", "id")
        .values_list("action", "created_at", "after")
    )
    for action, at, after in entries:
        after = after if isinstance(after, dict) else {}
        detail = str(after.get("reason") or "") if action in WITH_REASON else ""
        if action == "reservation.queue" and reservation.status == Reservation.Status.QUEUED:
            detail = reservation.reason  # why it waits now (every queue pass keeps it current)
        if action == "reservation.create":  # the request itself is its created_at
            if after.get("status") in PLACED_AT_ONCE:
                steps.append(Step("placed", at))
            continue
        steps.append(Step(STEPS[action], at, detail))
    steps += _fabric_steps(change)
    steps += _faults(reservation)
    return sorted(steps, key=lambda s: s.at)


#: At most this many faults in a reservation's history (the latest; a flapping link sends many).
MAX_FAULTS = 20


def _faults(reservation: Reservation) -> list[Step]:
    """The ``reservation.fabric_fault`` notices sent for the reservation: the fault and what the
    console did (the words its tenant's webhooks got)."""
    rows = (
        Event.objects.filter(
            tenant_id=reservation.tenant_id, reservation_id=reservation.pk, type="reservation.fabric_fault"
        )
        .order_by("-created_at")
        .values_list("created_at", "payload")[:MAX_FAULTS]
    )
    out = []
    for at, payload in rows:
        fault = ((payload or {}).get("data") or {}).get("fault") or {}
        words = [str(fault.get("message") or fault.get("kind") or "a fabric fault")]
        if fault.get("action"):
            words.append(str(fault["action"]))
        out.append(Step("fabric fault", at, " — ".join(words)))
    return out


def _fabric_steps(change: ChangeRequest | None) -> list[Step]:
    """Pushed (the carrying change started on the fabric) and verified (it was applied: the
    partition read back on its ports)."""
    out = []
    if change is not None and change.started_at is not None:
        out.append(Step("pushed", change.started_at))
    if change is not None and change.status == ChangeRequest.Status.APPLIED and change.finished_at is not None:
        out.append(Step("verified", change.finished_at))
    return out
