"""Celery task of power management: one BMC action and its polling (thin; see services.drive)."""

from celery import shared_task

from console.power import policy, services


@shared_task(name="power.drive", acks_late=True, ignore_result=True)
def drive_task(node_id: int, action: str) -> str:
    """Send ``action`` (on | off | force-off) to the node's BMC and wait for the state; a redelivered
    message finds the node settled and does nothing."""
    return services.drive(node_id, action)


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
