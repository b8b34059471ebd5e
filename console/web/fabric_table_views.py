"""A fabric's ports and events as tables (sort, filter, CSV): operators and auditors; 404 for
tenants (their live page keeps its own tenant-scoped events card).

Thin: the ports come from :func:`console.telemetry.porttable.port_rows` (the latest discovery
joined with the live snapshot), the events from ``FabricEvent``; the tables and filters live in
``console.web.tables``.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from console.fabric.discovery.services import latest_run
from console.fabric.models import Fabric
from console.telemetry import store
from console.telemetry.models import FabricEvent
from console.telemetry.porttable import port_rows
from console.tenancy.models import Role
from console.web.context import principal_for
from console.web.tables import respond, table_context
from console.web.tables.events import EventPageFilter, EventTable
from console.web.tables.ports import PortFilter, PortTable


def _fabric(request: HttpRequest, fabric_id: int) -> Fabric:
    if principal_for(request).role not in (Role.OPERATOR, Role.AUDITOR):
        raise Http404
    return get_object_or_404(Fabric, pk=fabric_id)


@login_required
@require_safe
def fabric_ports(request: HttpRequest, fabric_id: int) -> HttpResponse:
    """Every port of the latest discovery with its live state, utilisation, congestion and errors."""
    fabric = _fabric(request, fabric_id)
    run = latest_run(fabric)
    rows = port_rows(run.topology if run else {}, store.load_snapshot(fabric.pk))
    filterset = PortFilter(request.GET)
    table = PortTable(filterset.apply(rows))
    if (csv := respond(request, table, f"ports-{fabric.name}")) is not None:
        return csv
    note = f"discovery {run.pk} of {run.created_at:%Y-%m-%d %H:%M:%S} UTC" if run else "no discovery yet"
    context = table_context(request, table, filterset, testid="port", note=note)
    return render(request, "web/fabric_ports.html", {"fabric": fabric, "active": "fabrics", **context})


@login_required
@require_safe
def fabric_events(request: HttpRequest, fabric_id: int) -> HttpResponse:
    """The fabric's events, newest first: kind, severity, status, time range (UTC) and text."""
    fabric = _fabric(request, fabric_id)
    filterset = EventPageFilter(request.GET, FabricEvent.objects.filter(fabric=fabric))
    table = EventTable(filterset.qs if filterset.is_valid() else FabricEvent.objects.none())
    if (csv := respond(request, table, f"events-{fabric.name}")) is not None:
        return csv
    context = table_context(request, table, filterset, testid="event", note="times in UTC")
    return render(request, "web/fabric_events.html", {"fabric": fabric, "active": "fabrics", **context})
