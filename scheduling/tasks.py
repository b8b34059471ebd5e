"""Celery tasks of scheduling: the periodic tick (start windows, expire, re-enqueue reconciles, a
safety queue pass per pool with queued requests) and the queue pass published after capacity frees."""

from celery import shared_task
from django.conf import settings

from scheduling import slurm_mirror
from scheduling.services import queue
from scheduling.services.lifecycle import tick


@shared_task(name="scheduling.tick", acks_late=True, ignore_result=True)
def tick_task() -> dict[str, int]:
    """Idempotent: placed → provisioning at start, → ending at end, stuck reconciles re-sent, and
    a queue pass for every pool with queued requests (a lost ``scheduling.queue_pass`` message
    only delays a placement until the next tick)."""
    counts = tick()
    counts["queue_placed"] = sum(queue.queue_pass(pool_id)["placed"] for pool_id in queue.pools_with_queue())
    return counts


@shared_task(name="scheduling.queue_pass", acks_late=True, ignore_result=True)
def queue_pass_task(pool_id: int) -> dict[str, int]:
    """Place what fits of the pool's queue, in order (idempotent: a pass with nothing to place
    only refreshes estimates)."""
    return queue.queue_pass(pool_id)


@shared_task(name="scheduling.slurm_sync", acks_late=True, ignore_result=True)
def slurm_sync_task() -> dict[str, int]:
    """Mirror the reservations into Slurm (``scheduling.slurm_mirror``) when ``SLURM_MIRROR_CONF``
    names a slurm.conf; idempotent, so a lost run only delays Slurm by one period."""
    if not settings.SLURM_MIRROR_CONF:
        return {}
    return slurm_mirror.sync()
