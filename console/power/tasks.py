"""Celery tasks of power management (thin; see services.drive and services.poll).

A transition never waits inside one task: ``power.drive`` sends the BMC action and reads the status
once, then ``power.poll`` re-queues itself (``countdown``) every few seconds until the BMC reports
the target or the deadline (boot time plus margin) passes. Each run is one BMC call (the drivers
time out after 10-15 s), far below the task's soft time limit; a call that hangs anyway is cut by
it and the transition reads again later or, past its deadline, is recorded ``failed``."""

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from console.power import policy, services

#: seconds one power task may run (a BMC call and a row write); the hard limit a little later
SOFT_LIMIT_S = 60
HARD_LIMIT_S = 90


@shared_task(
    name=services.DRIVE, acks_late=True, ignore_result=True, soft_time_limit=SOFT_LIMIT_S, time_limit=HARD_LIMIT_S
)
def drive_task(node_id: int, action: str) -> str:
    """Send ``action`` (on | off | force-off) to the node's BMC and start polling it; a
    redelivered message finds the node settled (or polled) and does nothing."""
    try:
        return services.drive(node_id, action)
    except SoftTimeLimitExceeded:
        return services.interrupted(node_id, action, None)


@shared_task(
    name=services.POLL, acks_late=True, ignore_result=True, soft_time_limit=SOFT_LIMIT_S, time_limit=HARD_LIMIT_S
)
def poll_task(node_id: int, action: str, deadline: float) -> str:
    """Read the node's BMC once: settle the transition, give it up past ``deadline``, or read
    again in a few seconds."""
    try:
        return services.poll(node_id, action, deadline)
    except SoftTimeLimitExceeded:
        return services.interrupted(node_id, action, deadline)


@shared_task(name="power.reap_stuck", acks_late=True, ignore_result=True)
def reap_stuck_task() -> list[int]:
    """Periodic: transitions that outlived their time limit become ``failed`` (idempotent)."""
    return services.reap_stuck()


@shared_task(name="power.apply_policies", ignore_result=True)
def apply_policies_task() -> dict[int, str]:
    """Periodic (every minute): apply every enabled pool's power policy; one pool's failure does
    not stop the others. Idempotent: a second run finds the nodes already switched (or booting)
    and the rate limit counting the first run's actions."""
    return policy.apply_enabled()
