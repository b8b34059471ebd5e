"""The live topology page: ``fabrics/<id>/live/`` for operators, auditors and tenants.

Thin: positions come from the designer's server-side canvas (level of detail) on the fabric's
design revision; everything live comes over the WebSocket and the telemetry API. Levels: the
fabric (``?level=fabric``), a pod (``?level=pod&focus=su-1``) and a switch (``?switch=<name>``
or ``?level=switch&focus=<name>``): its port table from the telemetry API beside its pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from console.fabric.models import Fabric
from console.telemetry.snapshots import canvas_for
from console.tenancy.models import Principal
from console.web.context import principal_for
from designer.canvas import AUTO_DETAIL_SWITCHES, CanvasError, canvas_view, group_of
from designer.services import revision_graph
from scheduling.models import Reservation, ReservationSubnet


def _principal(request: HttpRequest) -> Principal:
    principal = principal_for(request)
    if principal.role is None:
        raise Http404
    return principal


@login_required
def live_home(request: HttpRequest) -> HttpResponse:
    """The nav entry: the first lab fabric (a tenant's: the one its reservations run on)."""
    principal = _principal(request)
    fabric = None
    if not principal.sees_all_tenants and principal.tenant_id is not None:
        mine = Reservation.objects.filter(tenant_id=principal.tenant_id, status=Reservation.Status.READY)
        fabric_id = mine.order_by("-pk").values_list("fabric_id", flat=True).first()
        fabric = Fabric.objects.filter(pk=fabric_id).first() if fabric_id else None
    if fabric is None:
        fabric = Fabric.objects.filter(driver=Fabric.Driver.LAB).first() or Fabric.objects.first()
    if fabric is None:
        return render(request, "web/live.html", {"fabric": None, "active": "live"})
    return redirect("web:fabric-live", fabric_id=fabric.pk)


@dataclass(frozen=True)
class PickerGroup:
    """One site's fabrics in the live page's picker."""

    site: str
    fabrics: list[Fabric] = field(default_factory=list)


def fabric_picker(principal: Principal, current: Fabric) -> list[PickerGroup]:
    """The fabrics to switch to, grouped by site (sites by name, then fabrics without a site, each
    a site of its own). Operators and auditors: every fabric; a tenant: the fabrics its holding
    reservations run on (every subnet a reservation spanning sites touches, not only its home
    fabric), and this one (which fabrics a site holds is the operator's network)."""
    fabrics = Fabric.objects.select_related("site").order_by("name")
    if not principal.sees_all_tenants:
        mine = Reservation.objects.filter(tenant_id=principal.tenant_id or 0, status__in=Reservation.HOLDING)
        touched = ReservationSubnet.objects.filter(reservation__in=mine).values("fabric_id")
        fabrics = fabrics.filter(Q(pk__in=mine.values("fabric_id")) | Q(pk__in=touched) | Q(pk=current.pk))
    groups: dict[str, PickerGroup] = {}
    for fabric in sorted(fabrics, key=lambda f: (f.site is None, f.site.name if f.site else "", f.name)):
        key = f"site:{fabric.site_id}" if fabric.site else f"fabric:{fabric.pk}"
        groups.setdefault(key, PickerGroup(fabric.site.name if fabric.site else "No site")).fabrics.append(fabric)
    return list(groups.values())


@login_required
def fabric_live(request: HttpRequest, fabric_id: int) -> HttpResponse:
    """Links coloured by utilisation, down links dashed red, events, change progress."""
    principal = _principal(request)
    fabric = get_object_or_404(Fabric.objects.select_related("revision__design"), pk=fabric_id)
    graph = revision_graph(fabric.revision)
    level = request.GET.get("level", "auto")
    focus = request.GET.get("focus") or None
    switch = request.GET.get("switch") or None
    if level == "switch" or (level == "auto" and focus in graph.switches):
        if not focus:
            raise Http404("the switch level needs a switch name as focus")
        switch, level, focus = focus, "auto", None
    if switch is not None:
        # The switch level is its port table beside the switches (never the designer's
        # faceplate, which names every host on the switch, other tenants' included).
        if switch not in graph.switches:
            raise Http404(f"no switch {switch!r}")
        if level == "auto" and len(graph.switches) > AUTO_DETAIL_SWITCHES:
            level, focus = "pod", group_of(graph.switches[switch])
    try:
        view = canvas_view(graph, level, focus)
    except CanvasError as exc:
        raise Http404(str(exc)) from exc
    operator = principal.sees_all_tenants
    init = {
        "fabric": fabric.pk,
        "name": fabric.name,
        "role": principal.role,
        "operator": operator,
        "can_write": principal.is_operator and principal.can_write,
        "tenant": principal.tenant_id,
        "ws": f"/ws/live/fabric/{fabric.pk}/" if operator else f"/ws/live/tenant/{principal.tenant_id}/",
        "canvas": canvas_for(view, graph, fabric.pk, principal),
        "switch": switch,
    }
    picker = fabric_picker(principal, fabric)
    several = sum(len(group.fabrics) for group in picker) > 1
    context = {"fabric": fabric, "init": init, "active": "live", "picker": picker if several else None}
    return render(request, "web/live.html", context)
