"""Telemetry's side of the sites (console/fabric/sites.py, console/fabric/routing.py), connected
in :meth:`TelemetryConfig.ready`: a fallback sweep of a fabric runs on its site's queue, and a
fabric whose subnet manager stopped answering (an unresolved ``sm_state`` event: the collector
saw it leave MASTER or not answer) makes its site unreachable."""

from __future__ import annotations

from console.fabric import routing, sites
from console.telemetry.models import FabricEvent
from console.telemetry.tasks import COLLECT_FABRIC


def sm_not_answering(fabric_ids: list[int]) -> dict[int, str]:
    """Fabric id → the open ``sm_state`` event's message, for those of ``fabric_ids`` with one."""
    events = FabricEvent.objects.unresolved().filter(fabric_id__in=fabric_ids, kind=FabricEvent.Kind.SM_STATE)
    return dict(events.values_list("fabric_id", "message"))


def connect() -> None:
    routing.register(COLLECT_FABRIC, routing.argument("fabric_id", 0))
    sites.register_sm_check("telemetry.sm_state", sm_not_answering)
