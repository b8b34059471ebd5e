"""Start-up recovery of the fabric's changes: what a crash left in flight is driven on.

A worker killed mid-push leaves its change ``applying`` under a lease that lives on for
``lease_seconds`` (two minutes by default), and its late-acked task sits unacknowledged in the
broker until the visibility timeout; a broker restart loses queued messages. A process that
starts knows better than the clock: a lease held in the name of a worker that is starting now
(worker names are unique) and not renewed since that start belongs to a process that is gone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from console.fabric.changes.locks import change_for_update
from console.fabric.changes.pipeline import RUNNING, lease_seconds, reap_stuck_changes
from console.fabric.changes.requests import OPEN
from console.fabric.models import ChangeRequest
from console.tenancy import audit
from console.tenancy.context import Actor

ACTOR = Actor.system("fabric.recovery")


@dataclass
class ChangesRecovered:
    """What :func:`recover_changes` did, by change id."""

    released: list[int] = field(default_factory=list)  # leases of dead workers given up
    requeued: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    republished: list[int] = field(default_factory=list)
    open_fabrics: set[int] = field(default_factory=set)  # fabrics with a change still open


def _owned_by(workers: Iterable[str]) -> Q:
    query = Q(pk__in=[])
    for name in workers:
        query |= Q(lease_owner__startswith=f"{name}/")
    return query


def release_dead_leases(workers: Iterable[str], *, started_at: dt.datetime) -> list[int]:
    """Expire the leases that ``workers`` (names of workers starting now) held before
    ``started_at``: a lease renewed after it belongs to the new process and is left alone."""
    names = [w for w in workers if w]
    if not names:
        return []
    released = []
    candidates = ChangeRequest.objects.filter(_owned_by(names), status__in=RUNNING, lease_expires_at__isnull=False)
    for change_id in candidates.values_list("pk", flat=True):
        with transaction.atomic():
            change = change_for_update(change_id)
            expires = change.lease_expires_at
            if (
                change.status not in RUNNING
                or expires is None
                or not any(change.lease_owner.startswith(f"{n}/") for n in names)
            ):
                continue
            renewed_at = expires - dt.timedelta(seconds=lease_seconds(change.fabric))
            if renewed_at >= started_at:
                continue  # taken or renewed by the process that is starting: alive
            before = {"lease_owner": change.lease_owner, "lease_expires_at": expires.isoformat()}
            change.lease_expires_at = timezone.now() - dt.timedelta(microseconds=1)
            change.save(update_fields=["lease_expires_at"])
            audit.record(ACTOR, "fabric.change.lease_released", change, before=before, after={"reason": "worker gone"})
            released.append(change.pk)
    return released


def recover_changes(*, dead_workers: Iterable[str] = (), started_at: dt.datetime | None = None) -> ChangesRecovered:
    """Release dead workers' leases, requeue every change whose lease expired mid-push, republish
    every queued change (a lost message is harmless to resend: the lease admits one push).
    Idempotent."""
    started_at = started_at or timezone.now()
    report = ChangesRecovered(released=release_dead_leases(dead_workers, started_at=started_at))
    reaped = reap_stuck_changes(republish_after=dt.timedelta(0))
    report.requeued, report.failed, report.republished = reaped["requeued"], reaped["failed"], reaped["republished"]
    report.open_fabrics = set(ChangeRequest.objects.filter(status__in=OPEN).values_list("fabric_id", flat=True))
    return report
