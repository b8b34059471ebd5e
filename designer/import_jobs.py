"""Large ibnetdiscover imports as jobs: never parsed in a web request.

An import whose input (dump, node-name map and host types) is larger than
``CONSOLE_IMPORT_INLINE_BYTES`` (256 KiB: about 500 HCAs, well under a second to parse, infer,
validate and save) is stored as an :class:`ImportJob` and run by a worker (``designer.import``);
the page and the API answer at once with the job to follow: its ``step`` and ``percent`` as the
import goes through its phases, then the design it made or the error (naming the line and the
field, as an inline import does). A smaller one is imported in the request, as before.

The input is dropped when the job ends. A job no worker finished within :data:`STALE_AFTER_S`
(its worker lost) is failed the next time anyone reads the jobs.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict
from typing import Any

from celery import current_app as celery_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, ConsoleError
from console.tenancy.models import Principal
from console.tenancy.permissions import require_operator
from designer import services
from designer.models import Design, ImportJob

RUN_IMPORT = "designer.import"
#: The task's hard limit: the largest accepted dump (64 MB) takes about 30 s here.
TIME_LIMIT_S = 600
#: A queued or running job older than this lost its worker (or none runs): failed when read.
STALE_AFTER_S = 2 * TIME_LIMIT_S


def input_bytes(*parts: str | None) -> int:
    """The size of an import's input, in UTF-8 bytes."""
    return sum(len(part.encode()) for part in parts if part)


def needs_job(*parts: str | None) -> bool:
    """Whether an import of this input runs as a job (larger than ``CONSOLE_IMPORT_INLINE_BYTES``)."""
    return input_bytes(*parts) > settings.CONSOLE_IMPORT_INLINE_BYTES


def start(
    actor: Actor,
    principal: Principal,
    *,
    name: str,
    text: str,
    description: str = "",
    node_name_map: str | None = None,
    host_types: str | None = None,
) -> ImportJob:
    """Queue the import (audited); 409 when the name is taken by a design or a running import."""
    require_operator(principal, to="change designs and the catalogue")
    reap()
    if Design.objects.filter(name=name).exists():
        raise Conflict(f"a design named {name!r} exists", fields={"name": ["taken"]})
    if ImportJob.objects.filter(name=name, state__in=ImportJob.ACTIVE).exists():
        raise Conflict(f"an import named {name!r} is already running", fields={"name": ["taken"]})
    with transaction.atomic():
        job = ImportJob.objects.create(
            name=name,
            description=description,
            text=text,
            node_name_map=node_name_map or "",
            host_types=host_types or "",
            size_bytes=input_bytes(text, node_name_map, host_types),
            requested_by=asdict(actor),
            created_by_id=principal.user_id,
        )
        audit.record(
            actor, "design.import_queued", job, after={"name": name, "size_bytes": job.size_bytes, "job": job.pk}
        )
        transaction.on_commit(lambda: publish(job.pk))
    return job


def publish(job_id: int) -> None:
    """Send ``designer.import`` to the default queue (an import talks to no fabric)."""
    celery_app.send_task(RUN_IMPORT, kwargs={"job_id": job_id}, ignore_result=True, time_limit=TIME_LIMIT_S)


def run(job_id: int) -> ImportJob | None:
    """The worker's side: import, saying each phase; done with its design, or failed with the
    reason. A job already taken or finished is left alone."""
    taken = ImportJob.objects.filter(pk=job_id, state=ImportJob.State.QUEUED).update(
        state=ImportJob.State.RUNNING, started_at=timezone.now(), step="starting"
    )
    job = ImportJob.objects.filter(pk=job_id).first()
    if not taken or job is None:
        return job

    def progress(step: str, percent: int) -> None:
        ImportJob.objects.filter(pk=job_id, state=ImportJob.State.RUNNING).update(step=step[:200], percent=percent)

    user = job.created_by
    try:
        design, _ = services.import_ibnetdiscover(
            Actor(**job.requested_by),
            Principal.of(user) if user is not None else Principal.nobody(),
            name=job.name,
            text=job.text,
            description=job.description,
            node_name_map=job.node_name_map or None,
            host_types=job.host_types or None,
            progress=progress,
        )
    except ConsoleError as exc:
        _finish(job_id, state=ImportJob.State.FAILED, error=exc.detail, fields=exc.fields)
    except Exception as exc:  # recorded for the person waiting, then the worker's log has it
        _finish(job_id, state=ImportJob.State.FAILED, error=f"{type(exc).__name__}: {exc}")
        raise
    else:
        _finish(job_id, state=ImportJob.State.DONE, design_id=design.pk)
    job.refresh_from_db()
    return job


def _finish(
    job_id: int, *, state: str, error: str = "", fields: dict[str, Any] | None = None, design_id: int | None = None
) -> None:
    ImportJob.objects.filter(pk=job_id).update(
        state=state,
        error=error[:4000],
        fields=fields or {},
        design_id=design_id,
        step="",
        percent=100,
        text="",
        node_name_map="",
        host_types="",
        finished_at=timezone.now(),
    )


def read(job_id: int) -> ImportJob | None:
    """The job as it stands (followed every second by its page): one read, and the stale-job
    reaping only when this job is itself queued or running past :data:`STALE_AFTER_S`."""
    job = ImportJob.objects.filter(pk=job_id).first()
    if job is not None and job.state in ImportJob.ACTIVE and timezone.now() - job.created_at > _stale():
        reap()
        job.refresh_from_db()
    return job


def _stale() -> dt.timedelta:
    return dt.timedelta(seconds=STALE_AFTER_S)


def reap() -> int:
    """Fail the jobs no worker finished within :data:`STALE_AFTER_S`; how many."""
    limit = timezone.now() - _stale()
    return ImportJob.objects.filter(state__in=ImportJob.ACTIVE, created_at__lt=limit).update(
        state=ImportJob.State.FAILED,
        error=f"no worker finished it within {STALE_AFTER_S} s (a worker lost, or none running): import it again",
        step="",
        text="",
        node_name_map="",
        host_types="",
        finished_at=timezone.now(),
    )


def job_json(job: ImportJob) -> dict[str, Any]:
    """A job as the API answers it."""
    return {
        "id": job.pk,
        "name": job.name,
        "state": job.state,
        "step": job.step,
        "percent": job.percent,
        "size_bytes": job.size_bytes,
        "error": job.error,
        "field_errors": job.fields,
        "design": job.design_id,
        "created_at": job.created_at.isoformat(),
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        "url": url_of(job),
    }


def url_of(job: ImportJob) -> str:
    return f"/api/designs/imports/{job.pk}/"
