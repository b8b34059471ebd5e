"""Tasks run asynchronously on a real worker (Redis in production mode, the in-memory broker in
embedded mode), are audited as the system, and carry the enqueuing request's correlation id."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.utils import timezone

from console.celery import app
from console.tenancy import actions
from console.tenancy.context import Actor, reset_correlation_id, set_correlation_id
from console.tenancy.models import ApiToken, AuditEntry, Principal
from console.tenancy.tasks import prune_expired_tokens_task


@pytest.mark.smoke
def test_periodic_prune_runs_on_a_worker_and_is_audited(worker, member_a):
    assert not app.conf.task_always_eager
    token, _ = actions.issue_token(Actor.for_user(member_a), Principal.of(member_a), user=member_a, name="old")
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - dt.timedelta(days=40))
    keep, _ = actions.issue_token(Actor.for_user(member_a), Principal.of(member_a), user=member_a, name="fresh")

    marker = set_correlation_id("enqueue-corr-1")
    try:
        prune_expired_tokens_task.delay()
    finally:
        reset_correlation_id(marker)

    deadline = time.monotonic() + 20
    while ApiToken.objects.filter(pk=token.pk).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not ApiToken.objects.filter(pk=token.pk).exists()
    assert ApiToken.objects.filter(pk=keep.pk).exists()
    entry = AuditEntry.objects.get(action="token.prune", object_id=str(token.pk))
    assert entry.actor_kind == "system"
    assert entry.actor_label == "task:tenancy.prune_expired_tokens"
    assert entry.correlation_id == "enqueue-corr-1"
