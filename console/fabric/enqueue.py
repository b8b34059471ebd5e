"""Publishing the fabric's Celery tasks by name, after the surrounding transaction commits.

The tasks (:mod:`console.fabric.tasks`) call the change services, so the services publish by task
name instead of importing the tasks back: no import cycle, and no caller above the fabric layer
needs the Celery app: they publish through ``celery.current_app``, which the project wiring makes the
console's app in every thread (``console/celery.py``). The options every fabric task is declared with live here too, so a message
published by name carries what ``task.apply_async`` would have put in it (time limits,
``ignore_result``).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app as celery_app
from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

APPLY_CHANGE = "fabric.apply_change"
RECONCILE = "fabric.reconcile"
REAP_STUCK_CHANGES = "fabric.reap_stuck_changes"
VERIFY_ALL = "fabric.verify_all"
DISCOVER = "fabric.discover"

VISIBILITY = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 3600)
TIME_LIMIT = min(settings.CELERY_TASK_TIME_LIMIT, int(VISIBILITY * 0.5))
assert TIME_LIMIT < VISIBILITY, "a push must never outlive the broker's visibility timeout"

#: Declared on every fabric task: late ack, back to the queue when the worker dies, and a hard
#: time limit below the broker's visibility timeout.
COMMON: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
    "time_limit": TIME_LIMIT,
    "soft_time_limit": TIME_LIMIT - 30,
}
#: The per-message options ``apply_async`` takes from a task declared with :data:`COMMON`.
PUBLISH_OPTIONS: dict[str, Any] = {key: COMMON[key] for key in ("ignore_result", "time_limit", "soft_time_limit")}


def enqueue_apply(change_id: int) -> None:
    """Publish ``fabric.apply_change`` once the surrounding transaction commits (never before:
    a worker must find the row, and a rolled-back change must not be pushed)."""
    transaction.on_commit(
        lambda: celery_app.send_task(APPLY_CHANGE, kwargs={"change_id": change_id}, **PUBLISH_OPTIONS)
    )


def enqueue_reconcile(fabric_id: int) -> None:
    """After commit, ask the fabric to converge to its desired state (``fabric.reconcile``)."""
    transaction.on_commit(lambda: publish_reconcile(fabric_id))


#: A reconcile not started within this many seconds is dropped by the worker that finds it: the
#: scheduling tick sends a stuck fabric's reconcile again every few seconds and a worker starting
#: at a site reconciles its fabrics, so the queue of a site whose workers are down holds a few
#: minutes of them, not a day's (a change, by contrast, never expires: it waits for its site).
RECONCILE_EXPIRES_S = 300


def publish_reconcile(fabric_id: int) -> None:
    """Publish ``fabric.reconcile`` now; a broker outage is logged, the periodic tick retries."""
    try:
        celery_app.send_task(RECONCILE, kwargs={"fabric_id": fabric_id}, expires=RECONCILE_EXPIRES_S)
    except Exception:  # the caller's rows are committed; a later reconcile converges the fabric
        log.exception("could not enqueue %s for fabric %s", RECONCILE, fabric_id)
