"""Publishing scheduling's Celery tasks by name, after the surrounding transaction commits.

The same pattern as :mod:`console.fabric.enqueue`: services publish by task name (no import of
:mod:`scheduling.tasks`, no cycle) and only once their rows are committed, so a worker finds them.
A lost message is harmless: the periodic tick runs a queue pass for every pool with queued
requests.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable

from celery import current_app as celery_app
from django.db import transaction

log = logging.getLogger(__name__)

QUEUE_PASS = "scheduling.queue_pass"


def enqueue_queue_pass(pool_ids: int | Iterable[int]) -> None:
    """After commit, ask for a queue pass of each pool (capacity freed or the queue changed)."""
    ids = sorted({pool_ids} if isinstance(pool_ids, int) else set(pool_ids))
    for pool_id in ids:
        transaction.on_commit(functools.partial(publish_queue_pass, pool_id))


def publish_queue_pass(pool_id: int) -> None:
    """Publish ``scheduling.queue_pass`` now; a broker outage is logged, the tick catches up."""
    try:
        celery_app.send_task(QUEUE_PASS, kwargs={"pool_id": pool_id}, ignore_result=True)
    except Exception:  # the caller's rows are committed; the periodic tick runs the pass anyway
        log.exception("could not enqueue %s for pool %s", QUEUE_PASS, pool_id)


SLURM_SYNC = "scheduling.slurm_sync"


def enqueue_slurm_sync() -> None:
    """After commit, mirror into Slurm now (a node drained or back), not at the next period."""
    transaction.on_commit(publish_slurm_sync)


def publish_slurm_sync() -> None:
    try:
        celery_app.send_task(SLURM_SYNC, ignore_result=True)
    except Exception:  # the periodic sync catches up
        log.exception("could not enqueue %s", SLURM_SYNC)
