"""The usage page: GPU-hours, borrowed hours, cost and preemptions over a window, as a stacked
chart per UTC day and a table with CSV export; for operators and auditors also the window's
energy per pool and UTC day (``console.power.energy``).

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

from console.power.energy import EnergyQuery, daily_by_pool
from console.tenancy.errors import Invalid
from console.tenancy.models import Tenant
from console.web.reservation_views import READERS, _principal
from console.web.tables import export_query, respond
from console.web.tables.usage import GROUP_LABELS, UsageTable, UsageWindowForm
from scheduling.models import Pool, PriorityClass
from scheduling.services.pricing import price_book
from scheduling.services.usage import UsageQuery, usage_report
from scheduling.usage import GroupBy


def _price_rows() -> list[dict[str, object]]:
    """Every pool's price per class (two queries): what the costs above were computed with."""
    book = price_book()
    classes = [cls.value for cls in PriorityClass]
    return [
        {
            "pool": pool.name,
            "prices": [(book.price(pool.pk, cls), (pool.pk, cls) in book.overrides) for cls in classes],
        }
        for pool in Pool.objects.order_by("name")
    ]


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _is_date(value: str, days_after_year_1: int = 0) -> bool:
    try:
        return dt.date.fromisoformat(value) > dt.date.min + dt.timedelta(days=days_after_year_1)
    except ValueError:
        return False


@login_required
def usage(request: HttpRequest) -> HttpResponse:
    """Usage and chargeback over a window of whole UTC days (default: the last 30)."""
    principal = _principal(request, READERS)
    tenants = Tenant.objects.order_by("name") if principal.sees_all_tenants else None
    today = timezone.now().astimezone(dt.UTC).date()
    # The selector always shows the window it reports (the last 30 UTC days, today included).
    data = request.GET.copy()
    data.setdefault("end", (today + dt.timedelta(days=1)).isoformat())
    end_text = str(data.get("end", ""))
    default_start = dt.date.fromisoformat(end_text) - dt.timedelta(days=30) if _is_date(end_text, 30) else None
    data.setdefault("start", default_start.isoformat() if default_start else "")
    form = UsageWindowForm(data, tenants=tenants)
    start, end, group_by, tenant_id = form.window(today)
    try:
        query = UsageQuery.checked(start, end, group_by, tenant_id)
    except Invalid as exc:  # an inverted or too long window: say so, show the default
        form.add_error(None, exc.detail)
        query = UsageQuery.checked(None, None, group_by, tenant_id)
    stack_by = GroupBy.TENANT if principal.sees_all_tenants else GroupBy.POOL
    report = usage_report(principal, query, stack_by=stack_by)
    # A reservation, a day or a site is no one quota (a reservation not several reservations): no such columns.
    exclude = {
        GroupBy.RESERVATION: ("reservations", "guaranteed_utilisation"),
        GroupBy.DAY: ("guaranteed_utilisation",),
        GroupBy.SITE: ("guaranteed_utilisation",),
    }
    table = UsageTable(
        report.rows,
        group_label=GROUP_LABELS[group_by],
        currency=report.currency,
        exclude=exclude.get(group_by, ()),
    )
    if (csv := respond(request, table, f"usage-{group_by.value}")) is not None:
        return csv
    energy = None
    if principal.sees_all_tenants:  # whole pools' energy is the operator's data
        energy = daily_by_pool(EnergyQuery(report.query.window_from, report.query.window_to))
        for row in energy["rows"]:
            row["saved"] = _percent(row["saved_fraction"])
        energy["total"]["saved"] = _percent(energy["total"]["saved_fraction"])
    return render(
        request,
        "web/usage.html",
        {
            "active": "usage",
            "form": form,
            "report": report,
            "table": table,
            "export_query": export_query(request),
            "chart": report.series,
            "guarantee_used": _percent(report.total["guaranteed_utilisation"]),
            "prices": _price_rows(),
            "classes": [cls.label for cls in PriorityClass],
            "energy": energy,
        },
    )
