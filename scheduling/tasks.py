"""Celery tasks of scheduling: the periodic tick (start windows, expire, re-enqueue reconciles)."""

from celery import shared_task

from scheduling.services.lifecycle import tick


@shared_task(name="scheduling.tick", acks_late=True, ignore_result=True)
def tick_task() -> dict[str, int]:
    """Idempotent: placed → provisioning at start, → ending at end, stuck reconciles re-sent."""
    return tick()
