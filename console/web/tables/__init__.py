"""The console's HTML tables: sorting, filtering, pagination and CSV export.

django-tables2 (sorting by clickable headers, pagination, ``TableExport`` through tablib) with
django-filter FilterSets, as NetBox does: a page builds its FilterSet and Table from here and
calls :func:`respond`, which either answers the CSV (``?_export=csv``, the filters and sort
kept, every matching row, not one page) or configures the table for the page's template.
The Table and FilterSet classes live in the modules beside this one, one per page.
"""

from __future__ import annotations

from typing import Any

import django_filters
import django_tables2 as tables
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django_tables2.export import TableExport

from designer.exports.csvcells import safe_row

#: Rows per page; ``?per_page=`` may ask for up to MAX_PER_PAGE.
PER_PAGE = 50
MAX_PER_PAGE = 500
EXPORT_PARAM = "_export"


class ConsoleTable(tables.Table):
    """Classes only (strict CSP): the console's grid style, a template with accessible sort links."""

    #: The CSV leaves out columns that only make sense on screen (buttons, details widgets).
    screen_only: tuple[str, ...] = ()

    class Meta:
        template_name = "web/table.html"
        attrs = {"class": "grid sortable"}
        empty_text = "Nothing matches."


class YesNoColumn(tables.BooleanColumn):
    """A yes/no column that says yes or no in the CSV too (not True/False)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(yesno="yes,no", **kwargs)

    def value(self, value: object, **kwargs: Any) -> str:
        return "yes" if value else "no"


def _per_page(request: HttpRequest) -> int:
    wanted = request.GET.get("per_page", "")
    return min(int(wanted), MAX_PER_PAGE) if wanted.isdigit() and int(wanted) > 0 else PER_PAGE


def respond(request: HttpRequest, table: ConsoleTable, export_name: str) -> HttpResponse | None:
    """The CSV when the request asks for it, else None after sorting and paginating ``table``.

    The CSV is named ``<export_name>-<UTC time>.csv``; it holds exactly the rows the page's
    (tenant-scoped) queryset and filters give, in the page's sort order."""
    tables.RequestConfig(request, paginate={"per_page": _per_page(request)}).configure(table)
    return export_csv(table, export_name) if request.GET.get(EXPORT_PARAM) == "csv" else None


def export_csv(table: ConsoleTable, export_name: str) -> HttpResponse:
    """Every row of ``table`` as CSV (tablib), named ``<export_name>-<UTC time>.csv``; every cell
    a spreadsheet would run as a formula made inert (:mod:`designer.exports.csvcells`)."""
    exporter = TableExport("csv", table, exclude_columns=table.screen_only)
    data = exporter.dataset
    for i, row in enumerate(list(data)):
        data[i] = tuple(safe_row(row))
    stamp = timezone.now().strftime("%Y%m%d-%H%M%SZ")
    response: HttpResponse = exporter.response(f"{export_name}-{stamp}.csv")
    return response


def export_query(request: HttpRequest) -> str:
    """The current query string (filters, sort) with ``_export=csv`` and without the page."""
    query = request.GET.copy()
    query.pop("page", None)
    query[EXPORT_PARAM] = "csv"
    return query.urlencode()


def table_context(request: HttpRequest, table: ConsoleTable, filterset: Any, **extra: Any) -> dict[str, Any]:
    """What ``web/table_block.html`` needs: the table, its filter form and the export link."""
    return {"table": table, "filter_form": filterset.form, "export_query": export_query(request), **extra}


def scope_choices(filterset: django_filters.FilterSet, name: str, queryset: QuerySet[Any]) -> None:
    """Narrow a drop-down filter's choices (e.g. to the tenants the principal may see)."""
    choice = filterset.filters[name]
    assert isinstance(choice, django_filters.ModelChoiceFilter)
    choice.queryset = queryset


def label_empty_choices(filterset: django_filters.FilterSet) -> None:
    """Drop-downs read "any" rather than "---------" when no choice is made."""
    for choice in filterset.filters.values():
        if isinstance(choice, django_filters.ChoiceFilter | django_filters.ModelChoiceFilter):
            choice.extra["empty_label"] = "any"
