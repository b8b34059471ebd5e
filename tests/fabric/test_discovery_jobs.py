"""Discovery jobs without a lab: one queued or running per fabric however many ask at once (real
transactions on PostgreSQL), a job whose worker died is failed and replaced, and the worker's
side says each step and how it ended."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.fabric.discovery import jobs, sources
from console.fabric.drivers.base import Progress
from console.fabric.models import DiscoveryJob, Fabric
from console.tenancy.context import Actor
from console.tenancy.models import AuditEntry
from tests.fabric.lab_fixtures import su1_revision  # noqa: F401 (fixture)
from tests.needs import needs
from tests.power.racing import race

ACTOR = Actor.system("test")


@pytest.fixture
def fabric(su1_revision) -> Fabric:  # noqa: F811 (fixture)
    return Fabric.objects.create(name="prod-ib", driver="agent", revision=su1_revision)


@pytest.fixture
def published(monkeypatch) -> list[tuple[int, int]]:
    """What would reach the broker (the worker's side is exercised directly below)."""
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(jobs, "publish", lambda job_id, fabric_id: sent.append((job_id, fabric_id)))
    return sent


@pytest.mark.django_db
def test_a_second_request_joins_the_job_queued_and_a_finished_one_does_not_block(
    fabric, published, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        first, created = jobs.start(fabric, actor=ACTOR)
    assert created and published == [(first.pk, fabric.pk)]
    with django_capture_on_commit_callbacks(execute=True):
        joined, created = jobs.start(fabric, actor=ACTOR)
    assert joined.pk == first.pk and not created and len(published) == 1
    DiscoveryJob.objects.filter(pk=first.pk).update(state=DiscoveryJob.State.DONE)
    second, created = jobs.start(fabric, actor=ACTOR)
    assert created and second.pk != first.pk
    assert AuditEntry.objects.filter(action="fabric.discover_requested").count() == 2


@pytest.mark.django_db
def test_a_job_whose_worker_died_is_failed_and_a_new_one_starts(fabric, published):
    lost, _ = jobs.start(fabric, actor=ACTOR)
    old = timezone.now() - dt.timedelta(seconds=jobs.STALE_AFTER_S + 1)
    DiscoveryJob.objects.filter(pk=lost.pk).update(created_at=old, state=DiscoveryJob.State.RUNNING)
    fresh, created = jobs.start(fabric, actor=ACTOR)
    lost.refresh_from_db()
    assert created and fresh.pk != lost.pk
    assert lost.state == "failed" and "no worker finished it" in lost.error and lost.finished_at


@pytest.mark.django_db
def test_the_worker_says_each_step_and_keeps_the_reason_of_a_failure(fabric, published, monkeypatch):
    seen: list[str] = []

    class Failing:
        def __init__(self, fabric):
            pass

        def sweep(self, progress: Progress) -> sources.Sweep:
            progress("ibnetdiscover", "running")
            seen.append(DiscoveryJob.objects.get().step)
            raise sources.DiscoveryFailed("ibnetdiscover failed: no port answered")

    monkeypatch.setattr(sources, "AgentSource", Failing)
    job, _ = jobs.start(fabric, actor=ACTOR)
    assert jobs.run(job.pk).state == "failed"
    job.refresh_from_db()
    assert seen == ["ibnetdiscover"] and job.error == "ibnetdiscover failed: no port answered"
    assert job.started_at and job.finished_at and job.step == "" and job.run is None
    assert jobs.run(job.pk).state == "failed"  # a redelivered message leaves a finished job alone
    assert jobs.job_json(job)["url"] == f"/api/fabrics/{fabric.pk}/discovery/jobs/{job.pk}/"


@needs("postgresql")
@pytest.mark.django_db(transaction=True)
def test_many_requests_at_once_make_exactly_one_job(fabric, published):
    results = race(**{f"r{i}": lambda: jobs.start(fabric, actor=ACTOR) for i in range(6)})
    assert not [r for r in results.values() if isinstance(r, BaseException)], results
    answers = [(job.pk, created) for job, created in results.values()]
    assert len({pk for pk, _ in answers}) == 1 and sum(created for _, created in answers) == 1
    assert DiscoveryJob.objects.filter(fabric=fabric).count() == 1
    assert len(published) == 1
