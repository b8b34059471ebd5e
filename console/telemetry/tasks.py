"""Celery tasks: a fallback collector sweep (when no collector process heartbeats) and pruning."""

from __future__ import annotations

from typing import TypedDict

from celery import shared_task

from console.fabric.lab.fabrics import LabNotRunning
from console.fabric.models import Fabric
from console.telemetry import services, store
from console.telemetry.collector import COLLECTED, CollectorOptions, FabricCollector
from console.telemetry.readers import ReaderError


class _TaskOptions(TypedDict):
    """The options both tasks share, typed so they unpack into ``shared_task``'s keywords."""

    acks_late: bool
    reject_on_worker_lost: bool
    ignore_result: bool
    time_limit: int
    soft_time_limit: int


#: beat's fallback runs every 5 s: a sweep older than that is not worth running
COLLECT_EXPIRES_S = 10
COMMON: _TaskOptions = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
    "time_limit": 60,
    "soft_time_limit": 50,
}


COLLECT_FABRIC = "telemetry.collect_fabric"


@shared_task(name="telemetry.collect", **COMMON)
def collect() -> dict[str, str]:
    """Beat's fallback collector: one sweep of each fabric whose collector process is not
    running, as its own task on the queue of the fabric's site (a site whose SM or workers are
    down delays only its own sweeps). A sweep not started within the interval is dropped."""
    out: dict[str, str] = {}
    for fabric_id, name in Fabric.objects.filter(driver__in=COLLECTED).values_list("pk", "name"):
        if store.alive(fabric_id):
            out[name] = "collector running"
            continue
        collect_fabric.apply_async(kwargs={"fabric_id": fabric_id}, expires=COLLECT_EXPIRES_S)
        out[name] = "sweep queued"
    return out


@shared_task(name=COLLECT_FABRIC, **COMMON)
def collect_fabric(fabric_id: int) -> str:
    """One sweep of one fabric (routed to its site's queue: console/telemetry/sites.py; an agent
    fabric's counters are read by its agent)."""
    fabric = Fabric.objects.filter(pk=fabric_id).select_related("revision").first()
    if fabric is None:
        return "no such fabric"
    if store.alive(fabric.pk):
        return "collector running"
    try:
        collector = FabricCollector(fabric, CollectorOptions(lab_traffic=False))
        collector.setup()
    except LabNotRunning:
        return "lab not running"
    except ReaderError as exc:
        return f"not read: {exc}"
    try:
        collector.sweep()
        return "swept"
    finally:
        collector.close()


@shared_task(name="telemetry.prune", **COMMON)
def prune() -> dict[str, int]:
    """Minute averages of finished minutes; raw and minute rows past their retention dropped."""
    return services.downsample_and_prune()
