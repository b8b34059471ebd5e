"""Applying a change: database lease, driver push, recorded steps, exactly-once outcome.

Why a lease: Celery delivers at least once (late ack + redelivery after a lost worker, manual and
automatic retries), so two workers can hold the same change. Taking the lease locks the fabric
row and then the change row (always in that order) and refuses while another open change of the
fabric holds a live lease. The lease expires, so a killed worker's change is picked up by a
redelivered task or by :func:`reap_stuck_changes`. Every driver step is set-style, so running a
push again after a crash completes it instead of repeating it; the outcome (status, AppliedState,
the registered change listeners of :mod:`console.fabric.hooks` and the audit row of the effect)
is written once, in one transaction that first checks the change is not already finished.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from console.fabric.agents.rpc import AgentLost, SmNotAnswering
from console.fabric.agents.services import waiting_for_sm
from console.fabric.changes.adopt import adopt_operator_partitions, forget_dropped
from console.fabric.changes.desired import present_pkeys
from console.fabric.changes.locks import change_for_update, fabric_for_update
from console.fabric.diags.runner import DiagTimeout
from console.fabric.drivers import DesiredFabric, DriverError, driver_for
from console.fabric.enqueue import enqueue_apply
from console.fabric.hooks import notify_failed, notify_verified
from console.fabric.keys import keys_for
from console.fabric.models import AppliedState, ChangeRequest, ChangeStep, Fabric
from console.fabric.opensm.push import PushOptions, PushResult
from console.fabric.opensm.vguids import parse_prefix
from console.fabric.sites import heartbeat_stale
from console.tenancy import audit
from console.tenancy.context import Actor

log = logging.getLogger(__name__)
Status = ChangeRequest.Status
ACTOR = Actor.system("task:fabric.apply_change")
RUNNING = (Status.APPLYING, Status.VERIFYING)


class FabricBusy(RuntimeError):
    """Another change of the same fabric holds a live lease: retry later."""


# Errors worth a retry with backoff (the task's autoretry_for): the lease is released first.
TRANSIENT = (DiagTimeout, OperationalError, InterfaceError, FabricBusy, AgentLost)


class LeaseLost(RuntimeError):
    """Our lease was taken over (it expired and the change was reaped): stop quietly."""


def lease_seconds(fabric: Fabric) -> float:
    """How long a lease lasts without renewal (renewed at every step)."""
    return float((fabric.config or {}).get("lease_seconds", settings.FABRIC_CHANGE_LEASE_S))


def _mark_lost_steps(change: ChangeRequest, why: str) -> int:
    now = timezone.now()
    return change.steps.filter(status__in=[ChangeStep.Status.RUNNING, ChangeStep.Status.PENDING]).update(
        status=ChangeStep.Status.FAILED, log=why, finished_at=now
    )


def _fail(change: ChangeRequest, error: str, *, actor: Actor = ACTOR) -> None:
    """Finish ``change`` as failed (inside the caller's transaction, change row locked)."""
    change.status = Status.FAILED
    change.error = error[:4000]
    change.finished_at = timezone.now()
    change.lease_owner, change.lease_expires_at = "", None
    change.save()
    audit.record(actor, "fabric.change.failed", change, after={"error": change.error})
    notify_failed(change.fabric_id, change_id=change.pk, error=change.error)


def _fail_held(change_id: int, worker_id: str, step_why: str, error: str) -> ChangeRequest:
    """Fail a change this worker still leases (its running steps marked lost with
    ``step_why``); a change another worker took over or that ended meanwhile is left alone."""
    with transaction.atomic():
        locked = change_for_update(change_id)
        if not locked.is_terminal and locked.lease_owner == worker_id:
            _mark_lost_steps(locked, step_why)
            _fail(locked, error)
    return ChangeRequest.objects.get(pk=change_id)


def acquire(change_id: int, worker_id: str) -> ChangeRequest | None:
    """Take the lease of ``change_id`` for ``worker_id``; None when there is nothing to do."""
    with transaction.atomic():
        fabric_id = ChangeRequest.objects.filter(pk=change_id).values_list("fabric_id", flat=True).first()
        if fabric_id is None:
            log.warning("change %s does not exist (deleted?): nothing to do", change_id)
            return None
        fabric = fabric_for_update(fabric_id)
        change = change_for_update(change_id)
        if change.is_terminal or change.status == Status.PENDING_APPROVAL:
            return None
        if fabric.paused_at is not None:  # after a restore: resume() enqueues it again
            log.info("change %s waits: fabric %s is paused (%s)", change_id, fabric.name, fabric.paused_reason)
            return None
        now = timezone.now()
        live = change.lease_expires_at is not None and change.lease_expires_at > now
        if live and change.lease_owner != worker_id:
            return None  # another worker is on it right now
        if (
            ChangeRequest.objects.filter(fabric_id=fabric_id, lease_expires_at__gt=now)
            .exclude(pk=change.pk)
            .exclude(status__in=ChangeRequest.TERMINAL)
            .exists()
        ):
            raise FabricBusy(f"another change of fabric {fabric.name!r} is being pushed")
        newer = (
            ChangeRequest.objects.filter(fabric_id=fabric_id, pk__gt=change.pk)
            .filter(status__in=[Status.APPLIED, Status.UNCHANGED])
            .first()
        )
        if newer is not None:
            change.status, change.finished_at = Status.CANCELLED, now
            change.error = f"superseded by change {newer.pk}, already applied"
            change.save()
            audit.record(ACTOR, "fabric.change.superseded", change, after={"by": newer.pk})
            return None
        if change.status in RUNNING:
            lost = _mark_lost_steps(change, "worker lost: lease expired mid-step")
            audit.record(
                ACTOR, "fabric.change.resume", change, after={"attempt": change.attempts + 1, "lost_steps": lost}
            )
        if change.attempts >= settings.FABRIC_CHANGE_MAX_ATTEMPTS:
            _fail(change, f"gave up after {change.attempts} attempts")
            return None
        change.status = Status.APPLYING
        change.lease_owner = worker_id[:100]
        change.lease_expires_at = now + timedelta(seconds=lease_seconds(fabric))
        change.attempts += 1
        change.started_at = change.started_at or now
        change.save()
        return change


@dataclass
class _Live:
    """Steps of the running attempt as the browser sees them, plus the lease heartbeat."""

    change: ChangeRequest
    worker_id: str
    lease_s: float
    hooks: dict[str, Any]
    base_seq: int = 0
    current: ChangeStep | None = None

    def progress(self, name: str, status: str) -> None:
        """A driver step starts: show it, renew the lease, run a test pause if configured."""
        now = timezone.now()
        if self.current is not None and self.current.status == ChangeStep.Status.RUNNING:
            ChangeStep.objects.filter(pk=self.current.pk).update(status=ChangeStep.Status.OK, finished_at=now)
        step_name, _, target = name.partition(":")
        self.base_seq += 1
        self.current = ChangeStep.objects.create(
            change=self.change,
            seq=self.base_seq,
            name=step_name[:40],
            target=(target or self.change.fabric.name)[:100],
            status=ChangeStep.Status.RUNNING,
            started_at=now,
        )
        fields: dict[str, Any] = {"lease_expires_at": now + timedelta(seconds=self.lease_s)}
        if step_name == "verify":
            fields["status"] = Status.VERIFYING
        renewed = ChangeRequest.objects.filter(
            pk=self.change.pk, lease_owner=self.worker_id, status__in=RUNNING
        ).update(**fields)
        if not renewed:
            raise LeaseLost(f"change {self.change.pk}: lease lost before step {name}")
        pause = (self.hooks.get("pause_before") or {}).get(step_name)
        if pause and self.change.attempts in self.hooks.get("pause_attempts", [1]):
            time.sleep(float(pause))  # test-only: widen the window a crash test aims at


def _record_steps(change: ChangeRequest, first_seq: int, result: PushResult) -> list[ChangeStep]:
    """Replace the attempt's live placeholders by the driver's final steps, in order."""
    change.steps.filter(seq__gt=first_seq).delete()
    now = timezone.now()
    rows = []
    for i, step in enumerate(result.steps, start=first_seq + 1):
        name, _, target = step.name.partition(":")
        status = step.status if step.status in ChangeStep.Status.values else "failed"
        rows.append(
            ChangeStep(
                change=change,
                seq=i,
                name=name[:40],
                target=(target or change.fabric.name)[:100],
                status=status,
                log="\n".join(step.log)[:20000],
                started_at=now - timedelta(seconds=step.duration_s),
                finished_at=now,
                duration_s=round(step.duration_s, 4),
            )
        )
    return ChangeStep.objects.bulk_create(rows)


def _outcome_status(change: ChangeRequest, result: PushResult) -> str:
    if result.ok:
        return Status.APPLIED if change.diff else Status.UNCHANGED
    return Status.ROLLED_BACK if result.outcome == "rolled_back" else Status.FAILED


def finalize(change_id: int, worker_id: str, first_seq: int, result: PushResult) -> ChangeRequest:
    """Write the outcome once: status, steps, AppliedState, change listeners, audit."""
    with transaction.atomic():
        change = change_for_update(change_id)
        if change.is_terminal:
            return change  # already finished by another attempt: never a second effect
        if change.lease_owner != worker_id:
            raise LeaseLost(f"change {change_id}: lease lost before the outcome was written")
        for row in _record_steps(change, first_seq, result):
            audit.record(
                ACTOR,
                f"fabric.change.step.{row.status}",
                change,
                after={
                    "step": row.name,
                    "target": row.target,
                    "seq": row.seq,
                    "attempt": change.attempts,
                    "log": row.log[:2000],
                },
            )
        status = _outcome_status(change, result)
        change.status = status
        change.outcome = {
            "result": result.outcome,
            "duration_s": result.duration_s,
            "mismatches": result.mismatches[:50],
            "problems": [str(p) for p in result.problems[:50]],
            "attempt": change.attempts,
            "opensm_restarted": result.opensm_restarted,
            # Where each verified P_Key sits in its member ports' tables (the "how to use it" guide).
            "pkey_indexes": result.pkey_indexes if result.ok else {},
            # Member ports not on the fabric: findings on their partitions (the collector raises
            # them as alarms), not a rollback of everyone's change.
            "absent_members": result.absent_members,
            # Partitions found on the SM host that the console did not write: kept as written.
            "kept": [{"pkey": f"{k.pkey:#06x}", "name": k.name} for k in result.kept],
        }
        change.error = "; ".join(change.outcome["mismatches"] or change.outcome["problems"])[:4000]
        change.finished_at = timezone.now()
        change.lease_owner, change.lease_expires_at = "", None
        change.save()
        if status in (Status.APPLIED, Status.UNCHANGED):
            written = dict(change.artefacts)
            if result.written is not None:  # with the partitions it kept as an operator wrote them
                written["partitions.conf"] = result.written
            AppliedState.objects.update_or_create(
                fabric_id=change.fabric_id,
                defaults={
                    "desired": change.desired,
                    "artefacts": written,
                    "change": change,
                    "verified_at": change.finished_at,
                },
            )
            adopt_operator_partitions(change.fabric, result.kept, ACTOR)
            forget_dropped(change.fabric_id, change.desired, ACTOR)
            present = present_pkeys(change.desired, result.absent_members)
            notify_verified(change.fabric_id, present_pkeys=present, change_id=change.pk)
        else:
            notify_failed(change.fabric_id, change_id=change.pk, error=change.error or result.outcome)
        audit.record(ACTOR, f"fabric.change.{status}", change, after=change.outcome)
    return change


def release(change_id: int, worker_id: str) -> None:
    """Give the lease back, expired: a retry may take it at once, and if no retry comes the
    reaper finds the change (it is still applying) instead of it being stuck."""
    with transaction.atomic():
        ChangeRequest.objects.filter(pk=change_id, lease_owner=worker_id).update(
            lease_owner="", lease_expires_at=timezone.now()
        )


def push_options(fabric: Fabric) -> PushOptions:
    """Verification knobs from ``fabric.config`` (defaults suit the lab and real fabrics)."""
    config = fabric.config or {}
    return PushOptions(
        verify_timeout=float(config.get("verify_timeout", 15.0)),
        diag_timeout=float(config.get("diag_timeout", 5.0)),
        virtual_prefix=parse_prefix(settings.VGUID_PREFIX),
        keys=keys_for(fabric),
    )


def _sm_answers(change_id: int) -> None:
    """Raise :class:`SmNotAnswering` (transient: the task retries, the agent's report of its
    OpenSM back resumes it) while the change's fabric's subnet manager cannot take a push: the
    change stays queued, untouched, instead of failing or restarting OpenSM in passing."""
    fabric_id = ChangeRequest.objects.filter(pk=change_id).values_list("fabric_id", flat=True).first()
    if fabric_id is not None and (why := waiting_for_sm([fabric_id]).get(fabric_id)):
        raise SmNotAnswering(f"change {change_id}: {why}")


def apply_change(change_id: int, *, worker_id: str) -> ChangeRequest | None:
    """Push one change through its fabric's driver, exactly once in effect.

    Transient errors (DiagTimeout, OperationalError, FabricBusy) propagate for the task's retry
    after the lease is released; anything else the driver raises fails the change precisely.
    """
    if ChangeRequest.objects.filter(pk=change_id, fabric__paused_at__isnull=False).exists():
        return None  # waits, without asking its SM host, until the fabric is resumed (acquire checks again)
    _sm_answers(change_id)
    change = acquire(change_id, worker_id)
    if change is None:
        return None
    fabric = change.fabric
    first_seq = change.steps.order_by("-seq").values_list("seq", flat=True).first() or 0
    live = _Live(
        change,
        worker_id,
        lease_seconds(fabric),
        dict((fabric.config or {}).get("test_hooks") or {}),
        base_seq=first_seq,
    )
    previous_state = AppliedState.objects.filter(fabric=fabric).first()
    previous = DesiredFabric.from_json(previous_state.desired) if previous_state else None
    try:
        driver = driver_for(fabric)
        result = driver.push(
            DesiredFabric.from_json(change.desired),
            previous=previous,
            options=push_options(fabric),
            progress=live.progress,
        )
    except LeaseLost:
        log.warning("change %s: lease lost; another worker finishes it", change_id)
        return None
    except DriverError as exc:
        return _fail_held(change_id, worker_id, f"driver error: {exc}", f"{fabric.driver} driver: {exc}")
    except TRANSIENT:
        release(change_id, worker_id)
        raise
    except Exception as exc:  # a bug or an unexpected refusal: fail precisely, do not loop
        log.exception("change %s failed unexpectedly", change_id)
        why = f"{type(exc).__name__}: {exc}"
        return _fail_held(change_id, worker_id, why, why)
    except BaseException:  # killed by a time limit or shutdown: the reaper or a retry resumes
        release(change_id, worker_id)
        raise
    return finalize(change_id, worker_id, first_seq, result)


def reap_stuck_changes(*, now: Any = None, republish_after: timedelta | None = None) -> dict[str, list[int]]:
    """Find changes whose lease expired mid-push and re-enqueue them (or fail them after too
    many attempts); re-enqueue queued changes whose task may never have been published (queued
    longer than ``republish_after``, by default ``FABRIC_CHANGE_REPUBLISH_S``)."""
    now = now or timezone.now()
    requeued, failed, republished = [], [], []
    stuck = ChangeRequest.objects.filter(status__in=RUNNING, lease_expires_at__lt=now)
    for change_id in stuck.values_list("pk", flat=True):
        with transaction.atomic():
            change = change_for_update(change_id)
            if change.status not in RUNNING or (change.lease_expires_at or now) >= now:
                continue
            _mark_lost_steps(change, "worker lost: lease expired mid-step")
            if change.attempts >= settings.FABRIC_CHANGE_MAX_ATTEMPTS:
                _fail(change, f"worker lost {change.attempts} times; giving up")
                failed.append(change.pk)
                continue
            change.status = Status.QUEUED
            change.lease_owner, change.lease_expires_at = "", None
            change.save()
            audit.record(ACTOR, "fabric.change.requeue", change, after={"attempts": change.attempts})
            enqueue_apply(change.pk)
            requeued.append(change.pk)
    if republish_after is None:
        republish_after = timedelta(seconds=settings.FABRIC_CHANGE_REPUBLISH_S)
    stale = now - republish_after
    for change_id, fabric_id in ChangeRequest.objects.filter(
        status=Status.QUEUED, lease_owner="", created_at__lte=stale
    ).values_list("pk", "fabric_id"):
        if change_id in requeued or heartbeat_stale(fabric_id, now=now):
            continue  # (a site whose workers are gone: its message waits in its queue)
        with transaction.atomic():
            enqueue_apply(change_id)  # a duplicate is harmless: the lease admits one
        republished.append(change_id)
    return {"requeued": requeued, "failed": failed, "republished": republished}
