"""Celery tasks: a fallback collector sweep (when no collector process heartbeats) and pruning."""

from __future__ import annotations

from typing import TypedDict

from celery import shared_task

from console.fabric.lab.fabrics import LabNotRunning
from console.fabric.models import Fabric
from console.telemetry import services, store
from console.telemetry.collector import CollectorOptions, FabricCollector


class _TaskOptions(TypedDict):
    """The options both tasks share, typed so they unpack into ``shared_task``'s keywords."""

    acks_late: bool
    reject_on_worker_lost: bool
    ignore_result: bool
    time_limit: int
    soft_time_limit: int


COMMON: _TaskOptions = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
    "time_limit": 60,
    "soft_time_limit": 50,
}


@shared_task(name="telemetry.collect", **COMMON)
def collect() -> dict[str, str]:
    """One sweep of every lab fabric whose collector process is not running."""

    out: dict[str, str] = {}
    for fabric in Fabric.objects.filter(driver=Fabric.Driver.LAB).select_related("revision"):
        if store.alive(fabric.pk):
            out[fabric.name] = "collector running"
            continue
        try:
            collector = FabricCollector(fabric, CollectorOptions(lab_traffic=False))
            collector.setup()
        except LabNotRunning:
            out[fabric.name] = "lab not running"
            continue
        try:
            collector.sweep()
            out[fabric.name] = "swept"
        finally:
            collector.close()
    return out


@shared_task(name="telemetry.prune", **COMMON)
def prune() -> dict[str, int]:
    """Minute averages of finished minutes; raw and minute rows past their retention dropped."""
    return services.downsample_and_prune()
