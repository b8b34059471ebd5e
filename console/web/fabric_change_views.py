"""The progress page of one fabric change: its steps and a progress bar.

Thin: the page renders the change as it is now and then polls the REST API
(``/api/fabrics/<id>/changes/<cid>/``) every second until the change is terminal; the live
channel replaces the polling when it lands. Operators and auditors only (404 for anyone else).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from console.fabric.api.serializers import ChangeSerializer
from console.fabric.models import ChangeRequest
from console.tenancy.models import Role
from console.web.context import principal_for


@login_required
def fabric_change(request: HttpRequest, fabric_id: int, change_id: int) -> HttpResponse:
    """Steps of change ``change_id`` of fabric ``fabric_id`` with a progress bar."""
    if principal_for(request).role not in (Role.OPERATOR, Role.AUDITOR):
        raise Http404
    change = get_object_or_404(
        ChangeRequest.objects.select_related("fabric").prefetch_related("steps"),
        pk=change_id,
        fabric_id=fabric_id,
    )
    init = {
        "change": ChangeSerializer(change).data,
        "api": f"/api/fabrics/{fabric_id}/changes/{change_id}/",
        "poll_ms": 1000,
    }
    context = {"change": change, "fabric": change.fabric, "init": init, "active": "fabrics"}
    return render(request, "web/fabric_change.html", context)
