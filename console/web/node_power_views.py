"""A node's power page: ``nodes/<id>/power/`` for operators and auditors (404 for tenants: a
node's name is a host name, and its power is the operator's business).

Thin: the state, boot time and BMC come from the power app's models and services, the history
is a ``PowerEvent`` table; the buttons call the power API (``POST /api/nodes/<id>/power/``)
from ``frontend/src/power.ts`` after a confirmation, so the page and the API share one path.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_safe

from console.power import services
from console.power.models import Bmc, PowerEvent
from console.tenancy.models import Principal
from console.web.context import principal_for
from console.web.tables import respond, table_context
from console.web.tables.power import PowerEventFilter, PowerEventTable
from scheduling.models import Node, Reservation, ReservationAllocation

POLL_MS = 1000


def _reader(request: HttpRequest) -> Principal:
    principal = principal_for(request)
    if not principal.sees_all_tenants:
        raise Http404
    return principal


def bmc_summary(bmc: Bmc | None) -> dict[str, Any] | None:
    """What the page shows of a BMC: driver, address, user, system; whether a password is set,
    never the password."""
    if bmc is None:
        return None
    return {
        "driver": bmc.get_driver_display(),
        "address": bmc.address,
        "username": bmc.username,
        "system_id": bmc.system_id,
        "verify_tls": bmc.verify_tls,
        "has_password": bool(bmc.password_encrypted),
        "updated_at": bmc.updated_at,
    }


def _holding(node: Node) -> list[Reservation]:
    """The reservations holding GPUs of ``node`` now (operators see every tenant's)."""
    now = timezone.now()
    ids = ReservationAllocation.objects.filter(
        node=node, start__lte=now, end__gt=now, reservation__status__in=Reservation.HOLDING
    ).values_list("reservation_id", flat=True)
    return list(Reservation.objects.filter(pk__in=set(ids)).select_related("tenant").order_by("pk"))


@login_required
@require_safe
def node_power(request: HttpRequest, node_id: int) -> HttpResponse:
    """The node's power state and since when, its boot time, its BMC (no password), who holds
    it now, the power history (sort, filter, CSV) and, for operators, power on / graceful off /
    force off."""
    principal = _reader(request)
    node = Node.objects.select_related("fabric").filter(pk=node_id).first()
    if node is None:
        raise Http404
    filterset = PowerEventFilter(request.GET, PowerEvent.objects.filter(node=node))
    table = PowerEventTable(filterset.qs if filterset.is_valid() else PowerEvent.objects.none())
    if (csv := respond(request, table, f"power-{node.name}")) is not None:
        return csv
    bmc = bmc_summary(Bmc.objects.filter(node=node).first())
    boot_s = int(services.boot_time(node).total_seconds())
    can_act = principal.is_operator and principal.can_write
    init = {
        "node": node.pk,
        "name": node.name,
        "api": f"/api/nodes/{node.pk}/power/",
        "power_state": node.power_state,
        "boot_s": boot_s,
        "can_act": can_act and bmc is not None,
        "poll_ms": POLL_MS,
    }
    context = table_context(request, table, filterset, testid="power-event", note="times in UTC")
    return render(
        request,
        "web/node_power.html",
        {
            "active": "reservations",
            "node": node,
            "bmc": bmc,
            "boot_s": boot_s,
            "holding": _holding(node),
            "can_act": init["can_act"],
            "init": init,
            **context,
        },
    )
