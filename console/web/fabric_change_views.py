"""The change requests of a fabric (a filtered, sorted, paginated list) and the progress page
of one change: its steps and a progress bar.

Thin: the page renders the change as it is now and then polls the REST API
(``/api/fabrics/<id>/changes/<cid>/``) every second until the change is terminal; the live
channel replaces the polling when it lands. Operators and auditors only (404 for anyone else).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from console.fabric.api.serializers import ChangeSerializer
from console.fabric.filtersets import ChangeRequestFilterSet
from console.fabric.models import ChangeRequest, Fabric
from console.tenancy.models import Role
from console.web.context import principal_for
from console.web.tables import EXPORT_PARAM, export_csv, export_query
from console.web.tables.changes import ChangeTable


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


PAGE_SIZE = 50
SORTABLE = {"created_at": "Requested", "finished_at": "Finished", "id": "Id"}


@login_required
def fabric_changes(request: HttpRequest, fabric_id: int) -> HttpResponse:
    """Change requests of fabric ``fabric_id``, newest first: filtered by status, dry run,
    OpenSM restart and partition (the API's filterset), sortable by time, paginated. A push that
    restarted OpenSM is flagged. Three queries whatever the page holds. Operators and auditors."""
    if principal_for(request).role not in (Role.OPERATOR, Role.AUDITOR):
        raise Http404
    fabric = get_object_or_404(Fabric, pk=fabric_id)
    rows = ChangeRequest.objects.filter(fabric=fabric).defer("artefacts", "desired", "diff")
    filterset = ChangeRequestFilterSet(request.GET, queryset=rows)
    rows = filterset.qs if filterset.is_valid() else rows.none()
    if request.GET.get(EXPORT_PARAM) == "csv":
        return export_csv(ChangeTable(rows), f"changes-{fabric.name}")
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    ordering = request.GET.get("ordering") or "-created_at"
    context = {
        "fabric": fabric,
        "form": filterset.form,
        "page": page,
        "sort_links": _sort_links(request, ordering),
        "query": _query(request, page=None),
        "export_query": export_query(request),
        "ordering_param": request.GET.get("ordering", ""),
        "active": "fabrics",
    }
    return render(request, "web/fabric_changes.html", context)


def _query(request: HttpRequest, **replace: str | None) -> str:
    """The request's query string with some parameters replaced (``None`` drops one)."""
    query = request.GET.copy()
    for key, value in replace.items():
        query.pop(key, None)
        if value is not None:
            query[key] = value
    return query.urlencode()


def _sort_links(request: HttpRequest, ordering: str) -> dict[str, dict[str, str]]:
    """Per sortable column: the link that sorts by it (toggling direction) and its arrow."""
    links = {}
    for field in SORTABLE:
        current = ordering.lstrip("-") == field
        descending = ordering.startswith("-")
        target = field if current and descending else f"-{field}"
        arrow = ("▼" if descending else "▲") if current else ""
        sort = "descending" if current and descending else "ascending" if current else "none"
        links[field] = {"href": "?" + _query(request, ordering=target, page=None), "arrow": arrow, "sort": sort}
    return links
