"""The validation suite's tasks (:mod:`console.telemetry.validation`): one run on the fabric's
site queue, and the schedule's run of every fabric (``FABRIC_VALIDATE_S``)."""

from __future__ import annotations

from celery import shared_task

from console.fabric import hooks, routing
from console.fabric.models import Fabric
from console.telemetry import validation
from console.tenancy.context import Actor

VALIDATE_ALL = "telemetry.validate_all"


@shared_task(name=validation.VALIDATE, acks_late=False, ignore_result=True, time_limit=900, soft_time_limit=840)
def validate_fabric(run_id: int, fabric_id: int) -> str | None:
    """Run one queued validation (``fabric_id`` routes it to the fabric's site). Not re-delivered
    when its worker dies: the next request fails it as stale."""
    row = validation.run(run_id)
    return row.state if row is not None else None


@shared_task(name=VALIDATE_ALL, ignore_result=True)
def validate_all() -> int:
    """The schedule: queue a validation of every fabric (joining any already queued)."""
    actor = Actor.system("schedule:telemetry.validate_all")
    fabrics = list(Fabric.objects.all())
    for fabric in fabrics:
        validation.start(fabric, actor=actor, trigger="schedule")
    return len(fabrics)


def connect() -> None:
    """Route each run to its fabric's site queue; ``manage.py fabric validate`` runs the suite."""
    routing.register(validation.VALIDATE, routing.argument("fabric_id"))
    hooks.register_validator("telemetry.validation", validation.validate_now)
