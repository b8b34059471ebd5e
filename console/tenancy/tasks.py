"""Periodic housekeeping for tenancy."""

from celery import shared_task

from console.tenancy import idempotency
from console.tenancy.actions import prune_expired_tokens
from console.tenancy.context import Actor


@shared_task(name="tenancy.prune_expired_tokens", acks_late=True, ignore_result=True)
def prune_expired_tokens_task(older_than_days: int = 30) -> int:
    """Delete API tokens expired or revoked more than ``older_than_days`` ago, audited."""
    return prune_expired_tokens(Actor.system("task:tenancy.prune_expired_tokens"), older_than_days=older_than_days)


@shared_task(name="tenancy.prune_idempotency_keys", acks_late=True, ignore_result=True)
def prune_idempotency_keys_task() -> int:
    """Delete ``Idempotency-Key`` rows past their expiry (``IDEMPOTENCY_KEY_TTL_HOURS``)."""
    return idempotency.prune_expired()
