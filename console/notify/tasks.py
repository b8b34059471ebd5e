"""Celery tasks of notifications: a webhook delivery (retried with exponential backoff) and the
e-mail of an event."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from console.notify import delivery, mail


@shared_task(name="notify.deliver", bind=True, acks_late=True, ignore_result=True, max_retries=None)
def deliver_task(self: Any, delivery_id: int) -> None:
    """One attempt; on failure, retry after ``backoff_s(attempt)`` until the attempts run out
    (the count lives in the delivery row, so a redelivered message never adds an attempt)."""
    retry_in = delivery.attempt(delivery_id)
    if retry_in is not None:
        raise self.retry(countdown=retry_in)


@shared_task(name="notify.email", acks_late=True, ignore_result=True)
def email_task(event_id: str) -> int:
    return mail.send_event_mail(event_id)


@shared_task(name="notify.redeliver", ignore_result=True)
def redeliver_task() -> int:
    """Periodic: send the overdue deliveries again (their messages were lost); how many."""
    ids = delivery.overdue()
    for delivery_id in ids:
        deliver_task.delay(delivery_id)
    return len(ids)
