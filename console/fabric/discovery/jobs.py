"""Discovery as a job: asked for by a page, the API or a stale compare, run by a worker that
reaches the fabric (through its agent on the subnet-manager host), never in a web request.

At most one job per fabric is queued or running (a partial unique index): a second request joins
the first. The job says what it is doing (``step``: "ibnetdiscover", "routing check", "parsing",
"comparing with the design") as the agent reports it, and when it is done, which run it stored;
a failure keeps the agent's or the parser's words. A job whose worker died is failed by the next
request once it is older than :data:`STALE_AFTER_S` (so a fabric is never locked out of discovery).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Protocol, TypeVar

from celery import current_app as celery_app
from django.db import IntegrityError, transaction
from django.utils import timezone

from console.fabric.discovery import services
from console.fabric.discovery.sources import DISCOVERY_TIMEOUT, DiscoveryFailed
from console.fabric.enqueue import DISCOVER, PUBLISH_OPTIONS
from console.fabric.models import DiscoveryJob, DiscoveryRun, Fabric
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError

#: A queued or running job older than this lost its worker (a discovery's own limit is
#: DISCOVERY_TIMEOUT plus the agent's answer): the next request fails it and starts anew.
STALE_AFTER_S = 3 * DISCOVERY_TIMEOUT


def active(fabric: Fabric) -> DiscoveryJob | None:
    """The fabric's queued or running job, if any."""
    return DiscoveryJob.objects.filter(fabric=fabric, state__in=DiscoveryJob.ACTIVE).first()


def _reap(fabric: Fabric) -> None:
    limit = timezone.now() - dt.timedelta(seconds=STALE_AFTER_S)
    DiscoveryJob.objects.filter(fabric=fabric, state__in=DiscoveryJob.ACTIVE, created_at__lt=limit).update(
        state=DiscoveryJob.State.FAILED,
        error=f"no worker finished it within {STALE_AFTER_S:.0f} s (a worker lost, or none running)",
        finished_at=timezone.now(),
    )


def start(fabric: Fabric, *, actor: Actor) -> tuple[DiscoveryJob, bool]:
    """Queue a discovery of ``fabric`` (audited), or join the one queued or running:
    ``(job, created)``."""
    _reap(fabric)
    for _ in range(3):  # a job that ends between the insert and the read: try again
        try:
            with transaction.atomic():
                job = DiscoveryJob.objects.create(fabric=fabric, requested_by=asdict(actor))
                audit.record(actor, "fabric.discover_requested", fabric, after={"job": job.pk})
                transaction.on_commit(_publisher(job.pk, fabric.pk))
            return job, True
        except IntegrityError:
            joined = active(fabric)
            if joined is not None:
                return joined, False
    raise ConsoleError(f"could not queue a discovery of {fabric.name}: try again")


def _publisher(job_id: int, fabric_id: int) -> Callable[[], None]:
    return lambda: publish(job_id, fabric_id)


def publish(job_id: int, fabric_id: int) -> None:
    """Send ``fabric.discover`` (to the fabric's site queue: :mod:`console.fabric.routing`)."""
    celery_app.send_task(DISCOVER, kwargs={"job_id": job_id, "fabric_id": fabric_id}, **PUBLISH_OPTIONS)


def run(job_id: int) -> DiscoveryJob | None:
    """The worker's side: run the job's discovery, saying each step; done with its run, or failed
    with the reason. A job already taken or finished is left alone."""
    now = timezone.now()
    taken = DiscoveryJob.objects.filter(pk=job_id, state=DiscoveryJob.State.QUEUED).update(
        state=DiscoveryJob.State.RUNNING, started_at=now, step="starting"
    )
    job = DiscoveryJob.objects.select_related("fabric__revision__design").filter(pk=job_id).first()
    if not taken or job is None:
        return job

    def progress(step: str, _state: str) -> None:
        DiscoveryJob.objects.filter(pk=job_id, state=DiscoveryJob.State.RUNNING).update(step=step[:200])

    try:
        found = services.discover(job.fabric, actor=Actor(**job.requested_by), progress=progress)
    except ConsoleError as exc:
        _finish(job_id, state=DiscoveryJob.State.FAILED, error=exc.detail)
    except Exception as exc:  # recorded for the person waiting, then the worker's log has it
        _finish(job_id, state=DiscoveryJob.State.FAILED, error=f"{type(exc).__name__}: {exc}")
        raise
    else:
        _finish(job_id, state=DiscoveryJob.State.DONE, run_id=found.pk)
    job.refresh_from_db()
    return job


def _finish(job_id: int, *, state: str, error: str = "", run_id: int | None = None) -> None:
    DiscoveryJob.objects.filter(pk=job_id).update(
        state=state, error=error[:4000], run_id=run_id, step="", finished_at=timezone.now()
    )


class Job(Protocol):
    """A job row: its ``state``, and the states that mean it is not finished (``ACTIVE``)."""

    @property
    def ACTIVE(self) -> tuple[str, ...]: ...

    @property
    def state(self) -> str: ...

    def refresh_from_db(self) -> None: ...


J = TypeVar("J", bound=Job)


def wait(job: J, timeout: float, *, poll: float = 0.1) -> J:
    """``job`` (a discovery job, a validation run) re-read until it is finished or ``timeout``
    seconds passed (0: read once)."""
    deadline = time.monotonic() + timeout
    while True:
        job.refresh_from_db()
        if job.state not in job.ACTIVE or time.monotonic() >= deadline:
            return job
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        poll = min(poll * 1.5, 1.0)


class DiscoveryPending(Exception):
    """The discovery a caller needs is still queued or running: answer with the job to follow."""

    def __init__(self, job: DiscoveryJob) -> None:
        super().__init__(f"discovery job {job.pk} is {job.state}")
        self.job = job


def through_job(fabric: Fabric, *, actor: Actor, wait_s: float) -> Callable[[], DiscoveryRun]:
    """A new discovery for :func:`services.compare` that a worker runs: queued (or joined), waited
    for up to ``wait_s``; :class:`DiscoveryPending` when it is not done by then."""

    def fresh() -> DiscoveryRun:
        job = wait(start(fabric, actor=actor)[0], wait_s)
        if job.state == DiscoveryJob.State.DONE and job.run is not None:
            return job.run
        if job.state == DiscoveryJob.State.FAILED:
            raise DiscoveryFailed(job.error or f"discovery job {job.pk} failed")
        raise DiscoveryPending(job)

    return fresh


def job_json(job: DiscoveryJob) -> dict[str, Any]:
    """A job as the API answers it."""
    return {
        "id": job.pk,
        "fabric": job.fabric_id,
        "state": job.state,
        "step": job.step,
        "error": job.error,
        "discovery_id": job.run_id,
        "created_at": job.created_at.isoformat(),
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        "url": f"/api/fabrics/{job.fabric_id}/discovery/jobs/{job.pk}/",
    }
