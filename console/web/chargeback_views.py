"""The usage page: GPU-hours, borrowed hours, cost and preemptions over a window, as a stacked
chart per UTC day and a table with CSV export.

Thin: ``scheduling.services.usage`` computes (the same report as ``GET /api/usage/``). Tenants
see only their own tenant (the chart is stacked by pool); operators and auditors every tenant
(stacked by tenant), optionally one. The chart's data travels as ``json_script`` (strict CSP).
"""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from console.tenancy.errors import Invalid
from console.tenancy.models import Tenant
from console.web.reservation_views import READERS, _principal
from console.web.tables import export_query, respond
from console.web.tables.usage import GROUP_LABELS, UsageTable, UsageWindowForm
from scheduling.services.usage import UsageQuery, usage_report
from scheduling.usage import GroupBy


@login_required
def usage(request: HttpRequest) -> HttpResponse:
    """Usage and chargeback over a window of whole UTC days (default: the last 30)."""
    principal = _principal(request, READERS)
    tenants = Tenant.objects.order_by("name") if principal.sees_all_tenants else None
    form = UsageWindowForm(request.GET or None, tenants=tenants)
    start, end, group_by, tenant_id = form.window(timezone.now().astimezone(dt.UTC).date())
    try:
        query = UsageQuery.checked(start, end, group_by, tenant_id)
    except Invalid as exc:  # an inverted or too long window: say so, show the default
        form.add_error(None, exc.detail)
        query = UsageQuery.checked(None, None, group_by, tenant_id)
    stack_by = GroupBy.TENANT if principal.sees_all_tenants else GroupBy.POOL
    report = usage_report(principal, query, stack_by=stack_by)
    table = UsageTable(report.rows, group_label=GROUP_LABELS[group_by], currency=report.currency)
    if (csv := respond(request, table, f"usage-{group_by.value}")) is not None:
        return csv
    return render(
        request,
        "web/usage.html",
        {
            "active": "usage",
            "form": form,
            "report": report,
            "table": table,
            "filter_form": form,
            "export_query": export_query(request),
            "chart": report.series,
        },
    )
