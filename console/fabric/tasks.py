"""Celery tasks of the push pipeline. Thin: each calls one service.

All are late-acked and rejected back to the queue when their worker dies; their hard time limit
(:data:`console.fabric.enqueue.TIME_LIMIT`) stays below the broker's visibility timeout so a slow push is never
redelivered while it still runs, and the database lease makes any redelivery harmless. Transient
errors (a diag timeout, a dropped database connection, the fabric busy with another change) retry
with exponential backoff.
"""

from __future__ import annotations

import socket

from celery import Task, shared_task

from console.fabric.changes import pipeline
from console.fabric.changes.requests import reconcile
from console.fabric.discovery import jobs
from console.fabric.enqueue import (
    APPLY_CHANGE,
    COMMON,
    DISCOVER,
    REAP_STUCK_CHANGES,
    RECONCILE,
    VERIFY_ALL,
    publish_reconcile,
)
from console.fabric.models import Fabric
from console.tenancy.context import Actor


@shared_task(
    name=APPLY_CHANGE,
    bind=True,
    autoretry_for=pipeline.TRANSIENT,
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=8,
    **COMMON,
)
def apply_change_task(self: Task, change_id: int) -> str | None:
    """Push one change (lease, steps, verification, outcome written once)."""
    worker_id = f"{self.request.hostname or socket.gethostname()}/{self.request.id}"
    change = pipeline.apply_change(change_id, worker_id=worker_id)
    return change.status if change is not None else None


@shared_task(
    name=RECONCILE,
    autoretry_for=pipeline.TRANSIENT,
    retry_backoff=2,
    max_retries=5,
    **COMMON,
)
def reconcile_task(fabric_id: int) -> int | None:
    """Create a change when the fabric's desired state differs from what is applied."""
    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None:
        return None
    change = reconcile(fabric, actor=Actor.system("task:fabric.reconcile"))
    return change.pk if change is not None else None


@shared_task(name=REAP_STUCK_CHANGES, **COMMON)
def reap_stuck_changes_task() -> dict[str, list[int]]:
    """Periodic: re-enqueue (or fail) changes whose worker died mid-push."""
    return pipeline.reap_stuck_changes()


@shared_task(name=VERIFY_ALL, **COMMON)
def verify_all_task() -> int:
    """Periodic (every FABRIC_VERIFY_S): reconcile every fabric. With nothing to push, reconcile
    verifies the applied state on the wire (P_Key tables, QoS) and, when the ports lost it (an
    SM restarted with other files, a reimaged host), invalidates it (audited) and pushes again."""
    ids = list(Fabric.objects.values_list("pk", flat=True))
    for fabric_id in ids:
        publish_reconcile(fabric_id)
    return len(ids)


@shared_task(name=DISCOVER, **{**COMMON, "acks_late": False})
def discover_task(job_id: int, fabric_id: int) -> str | None:
    """Run a queued discovery job (``fabric_id`` routes it to the fabric's site). Not re-delivered
    when its worker dies: the job is failed as stale and the next request starts another."""
    job = jobs.run(job_id)
    return job.state if job is not None else None
