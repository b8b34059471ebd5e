"""The designer's Celery task: a large ibnetdiscover import (:mod:`designer.import_jobs`)."""

from __future__ import annotations

from celery import shared_task

from designer import import_jobs


@shared_task(name=import_jobs.RUN_IMPORT, ignore_result=True, time_limit=import_jobs.TIME_LIMIT_S)
def run_import(job_id: int) -> str | None:
    """Run a queued import job; acknowledged on receipt (a worker lost mid-import leaves the job
    to :func:`import_jobs.reap`, and the operator imports again)."""
    job = import_jobs.run(job_id)
    return job.state if job is not None else None
