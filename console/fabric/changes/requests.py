"""Change requests: create (or preview), approve, cancel, and reconcile desired with applied.

A change snapshots the complete desired state, its rendered artefacts and the unified diff
against what is applied. A dry run ends ``previewed`` and changes nothing else. With
``fabric.approval_required`` a change waits for an operator other than its requester. The push
itself is the Celery task ``fabric.apply_change``, published by name only after the change's row
commits (:func:`console.fabric.enqueue.enqueue_apply`).
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from console.fabric.agents.services import out_of_step
from console.fabric.changes.desired import applied_of, build_desired, diff_artefacts, present_pkeys
from console.fabric.changes.desired import render_artefacts as render
from console.fabric.changes.locks import change_for_update, fabric_for_update
from console.fabric.changes.ownership import refusal
from console.fabric.changes.pipeline import push_options
from console.fabric.drivers import DesiredFabric, driver_for
from console.fabric.enqueue import enqueue_apply
from console.fabric.hooks import notify_failed, notify_verified
from console.fabric.models import AppliedState, ChangeRequest, ChangeStep, Fabric
from console.tenancy import audit
from console.tenancy.context import Actor, current_correlation_id
from console.tenancy.errors import Conflict, Forbidden, Invalid
from console.tenancy.models import Principal
from console.tenancy.permissions import require_operator

log = logging.getLogger(__name__)
Status = ChangeRequest.Status
#: The reason of a change that pushes again what the wire lost (an SM restarted with other files).
REPAIR_REASON = "reconcile: applied state not on the fabric"
OPEN = (Status.PENDING_APPROVAL, Status.QUEUED, Status.APPLYING, Status.VERIFYING)


class IsolationRefused(Invalid):
    """The desired state would let two tenants' hosts talk: it never reaches OpenSM."""

    def __init__(self, detail: str, desired: dict) -> None:
        super().__init__(detail, fields={"desired": [detail]})
        self.desired = desired


def _plan(fabric: Fabric) -> tuple[dict, dict[str, str], str]:
    desired = build_desired(fabric)
    why = refusal(fabric, desired)
    if why is not None:
        raise IsolationRefused(why, desired)
    try:
        artefacts = render(desired)
    except ValueError as exc:
        detail = f"desired state does not render: {exc}"
        raise Invalid(detail, fields={"desired": [str(exc)]}) from None
    applied = applied_of(fabric)
    diff = diff_artefacts(applied.artefacts if applied else {}, artefacts)
    return desired, artefacts, diff


def _create(
    actor: Actor,
    fabric: Fabric,
    *,
    dry_run: bool,
    reason: str,
    user_id: int | None,
    plan: tuple[dict, dict[str, str], str],
) -> ChangeRequest:
    desired, artefacts, diff = plan
    if dry_run:
        status = Status.PREVIEWED
    elif fabric.approval_required:
        status = Status.PENDING_APPROVAL
    else:
        status = Status.QUEUED
    now = timezone.now()
    change = ChangeRequest.objects.create(
        fabric=fabric,
        status=status,
        dry_run=dry_run,
        reason=reason[:200],
        requested_by_id=user_id,
        requested_by_label=actor.label[:200],
        correlation_id=current_correlation_id(),
        desired=desired,
        artefacts=artefacts,
        diff=diff,
        finished_at=now if dry_run else None,
    )
    changed = diff.count("\n+") + diff.count("\n-")
    _first_step(
        change,
        "plan",
        ChangeStep.Status.OK,
        f"{len(desired['partitions'])} partitions, {len(desired['port_admin'])} port states; "
        f"{'no difference' if not diff else f'{changed} changed lines'} against applied state",
    )
    audit.record(
        actor,
        "fabric.change.create",
        change,
        after={"status": status, "dry_run": dry_run, "reason": reason, "diff": diff},
    )
    if status == Status.QUEUED:
        enqueue_apply(change.pk)
    return change


def _first_step(change: ChangeRequest, name: str, status: str, log: str) -> None:
    """The change's first step, done when the change is made (planned, or refused)."""
    now = change.created_at
    ChangeStep.objects.create(
        change=change,
        seq=1,
        name=name,
        target=change.fabric.name,
        status=status,
        log=log,
        started_at=now,
        finished_at=now,
        duration_s=0.0,
    )


def request_change(
    actor: Actor, principal: Principal, fabric: Fabric, *, dry_run: bool = False, reason: str = ""
) -> ChangeRequest:
    """Snapshot desired state, diff it and queue (or preview, or hold for approval) a push."""
    if dry_run:
        if principal.role not in ("operator", "auditor"):
            raise Forbidden("only operators and auditors preview fabric changes")
    else:
        require_operator(principal, to="change fabrics")
        if Fabric.paused_now(fabric.pk):
            raise Conflict(
                f"fabric {fabric.name!r} is paused since a restore: review it and resume "
                f"(manage.py fabric resume --fabric {fabric.name}) before pushing"
            )
    plan = _plan(fabric)
    with transaction.atomic():
        fabric_for_update(fabric.pk)
        return _create(actor, fabric, dry_run=dry_run, reason=reason, user_id=principal.user_id, plan=plan)


def approve(actor: Actor, principal: Principal, change: ChangeRequest) -> ChangeRequest:
    """Approve a pending change; its requester may not approve it themselves."""
    require_operator(principal, to="change fabrics")
    with transaction.atomic():
        change = change_for_update(change.pk)
        if change.status != Status.PENDING_APPROVAL:
            raise Conflict(f"change {change.pk} is {change.status}, not pending approval")
        if principal.user_id is None or principal.user_id == change.requested_by_id:
            raise Forbidden("a change needs an operator other than its requester to approve it")
        change.status = Status.QUEUED
        change.approved_by_id = principal.user_id
        change.approved_at = timezone.now()
        change.save(update_fields=["status", "approved_by", "approved_at"])
        audit.record(actor, "fabric.change.approve", change, after={"status": change.status})
        enqueue_apply(change.pk)
    return change


def cancel(actor: Actor, principal: Principal, change: ChangeRequest) -> ChangeRequest:
    """Cancel a change that has not started (pending approval or queued)."""
    require_operator(principal, to="change fabrics")
    with transaction.atomic():
        change = change_for_update(change.pk)
        if change.status not in (Status.PENDING_APPROVAL, Status.QUEUED) or change.lease_owner:
            raise Conflict(f"change {change.pk} is {change.status}; only waiting changes cancel")
        before = change.status
        change.status = Status.CANCELLED
        change.finished_at = timezone.now()
        change.save(update_fields=["status", "finished_at"])
        audit.record(actor, "fabric.change.cancel", change, before={"status": before}, after={"status": change.status})
    return change


def reconcile(fabric: Fabric, *, actor: Actor) -> ChangeRequest | None:
    """Create a change only when desired state differs from the applied one and no open change
    already carries exactly this desired state. Running it twice creates nothing the second time.

    When the fabric already carries the desired state and no change is under way, the listeners
    hear so again (the last verified change's P_Keys): a reservation whose partition was pushed
    before its start becomes ready at its start without a push that would change nothing. Not
    while a change is open: it may still put on the wire a P_Key the applied state lacks, and a
    listener must not take that P_Key for gone (and hand it out again) before the change ends.
    Nor on the strength of the stored applied state alone: it is verified on the fabric first
    (the driver's ``verify``, no write). A fabric that no longer carries it (its lab or subnet
    manager restarted with other files, its ports' tables lost) gets its applied state
    invalidated, audited, and a change that pushes the desired state again; a fabric that cannot
    be asked hears nothing (the periodic tick reconciles waiting reservations again).
    """
    if Fabric.paused_now(fabric.pk):
        return None  # after a restore, until an operator resumes it (console.fabric.paused)
    try:
        plan = _plan(fabric)
    except IsolationRefused as exc:
        return _refuse(actor, fabric, exc)
    desired = plan[0]
    known = applied_of(fabric)
    checked = on_the_wire(fabric, known) if _renotifies(fabric, known, desired) else None
    with transaction.atomic():
        fabric_for_update(fabric.pk)
        applied = applied_of(fabric)
        open_changes = list(fabric.changes.filter(status__in=OPEN))
        if applied is not None and applied.desired == desired:
            if applied.change_id is None or open_changes:
                return None
            if checked is None or known is None or known.change_id != applied.change_id:
                return None  # not verified now (or a newer change verified itself meanwhile)
            if not checked and (hosts := out_of_step(fabric)):
                # the wire is right; an SM host's files or priority are not: the same state again
                reason = f"reconcile: SM hosts out of step ({', '.join(hosts)})"
                return _create(actor, fabric, dry_run=False, reason=reason[:200], user_id=None, plan=plan)
            if not checked:
                absent = ((applied.change.outcome if applied.change else None) or {}).get("absent_members")
                present, change_id = present_pkeys(applied.desired, absent), applied.change_id
                transaction.on_commit(lambda: notify_verified(fabric.pk, present_pkeys=present, change_id=change_id))
                return None
            _invalidate(actor, fabric, applied, checked)
            plan = (desired, plan[1], diff_artefacts({}, plan[1]))
            return _create(
                actor,
                fabric,
                dry_run=False,
                reason=REPAIR_REASON,
                user_id=None,
                plan=plan,
            )
        if any(c.desired == desired for c in open_changes):
            return None
        waiting = next((c for c in open_changes if _coalescable(c)), None)
        if waiting is not None:
            return _coalesce(actor, waiting, plan)
        return _create(actor, fabric, dry_run=False, reason="reconcile: desired ≠ applied", user_id=None, plan=plan)


def _coalescable(change: ChangeRequest) -> bool:
    """A change a newer desired state may fold into: one reconcile queued that no worker has
    taken yet (it carries no operator's request, no approval, nothing of it reached OpenSM)."""
    return (
        change.status == Status.QUEUED
        and not change.lease_owner
        and change.attempts == 0
        and change.reason.startswith("reconcile: desired")
    )


def _coalesce(actor: Actor, change: ChangeRequest, plan: tuple[dict, dict[str, str], str]) -> ChangeRequest:
    """Fold the newer desired state into the waiting change (under the fabric's lock, which the
    pipeline's acquire takes too): a burst of writes (a tenant's pods adding virtual GUIDs one by
    one) is one push, not one each. Audited."""
    desired, artefacts, diff = plan
    before = {"diff": change.diff}
    ChangeRequest.objects.filter(pk=change.pk).update(desired=desired, artefacts=artefacts, diff=diff)
    change.desired, change.artefacts, change.diff = desired, artefacts, diff
    audit.record(actor, "fabric.change.coalesce", change, before=before, after={"diff": diff})
    return change


def _refuse(actor: Actor, fabric: Fabric, exc: IsolationRefused) -> ChangeRequest | None:
    """Record a refused change once per refused desired state (the periodic reconcile asks
    again every few seconds): failed, with the pairs named, listeners told, audited."""
    with transaction.atomic():
        fabric_for_update(fabric.pk)
        last = fabric.changes.order_by("-pk").first()
        if last is not None and last.status == Status.FAILED and last.desired == exc.desired:
            return None
        now = timezone.now()
        change = ChangeRequest.objects.create(
            fabric=fabric,
            status=Status.FAILED,
            reason="reconcile: refused",
            requested_by_label=actor.label[:200],
            correlation_id=current_correlation_id(),
            desired=exc.desired,
            error=exc.detail[:4000],
            outcome={"result": "refused", "problems": [exc.detail]},
            finished_at=now,
        )
        _first_step(change, "lint", ChangeStep.Status.FAILED, exc.detail)
        audit.record(actor, "fabric.change.refused", change, after={"error": exc.detail})
        notify_failed(fabric.pk, change_id=change.pk, error=exc.detail)
    return change


def _renotifies(fabric: Fabric, applied: AppliedState | None, desired: dict) -> bool:
    """Whether reconcile would re-notify ``applied`` (read without locks; checked again under them)."""
    return (
        applied is not None
        and applied.change_id is not None
        and applied.desired == desired
        and not fabric.changes.filter(status__in=OPEN).exists()
    )


def on_the_wire(fabric: Fabric, applied: AppliedState | None) -> list[str] | None:
    """What the fabric lacks of ``applied`` ([]: it carries it), verified through its driver
    without writing; None when it cannot be asked (lab or subnet manager down, diagnostics time
    out). Outside any transaction: verification reads every member port's P_Key table."""
    if applied is None:
        return None
    try:
        return list(driver_for(fabric).verify(DesiredFabric.from_json(applied.desired), options=push_options(fabric)))
    except Exception as exc:  # any failure to ask: no claim either way
        log.warning("fabric %s: could not verify its applied state: %s", fabric.pk, exc)
        return None


def _invalidate(actor: Actor, fabric: Fabric, applied: AppliedState, mismatches: list[str]) -> None:
    """Forget an applied state the fabric no longer carries (the next change diffs against nothing)."""
    before = {
        "change": applied.change_id,
        "verified_at": applied.verified_at.isoformat() if applied.verified_at else None,
    }
    applied.delete()
    audit.record(
        actor,
        "fabric.applied.stale",
        fabric,
        before=before,
        after={"change": before["change"], "mismatch": mismatches[0][:500], "mismatches": len(mismatches)},
    )
