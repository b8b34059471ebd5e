"""The events page's table and filters: the fabric events the live page's events card shows."""

from __future__ import annotations

import datetime as dt
from typing import Any

import django_filters
import django_tables2 as tables
from django.db.models import Q, QuerySet
from django.http import QueryDict
from django.utils.html import format_html

from console.telemetry.models import FabricEvent
from console.tenancy.filtersets import UtcIsoDateTimeFilter
from console.web.tables import ConsoleTable, label_empty_choices

TIME = r"Y-m-d H:i:s \U\T\C"  # on screen; the CSV value below leaves the zone to the header


class UtcTimeColumn(tables.DateTimeColumn):
    """24-hour UTC to the second, on screen and in the CSV (``2026-12-01 23:16:13``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(format=TIME, **kwargs)

    def value(self, value: dt.datetime | None, **kwargs: Any) -> str:
        return "" if value is None else value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


class EventPageFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_text", label="Subject or message")
    since = UtcIsoDateTimeFilter(field_name="opened_at", lookup_expr="gte", label="Opened from (UTC)")
    until = UtcIsoDateTimeFilter(field_name="opened_at", lookup_expr="lt", label="Opened before (UTC)")

    class Meta:
        model = FabricEvent
        fields = ["q", "kind", "severity", "status", "since", "until"]

    def __init__(self, data: QueryDict, queryset: QuerySet[FabricEvent]) -> None:
        super().__init__(data, queryset=queryset)
        label_empty_choices(self)

    def filter_text(self, queryset: QuerySet[FabricEvent], name: str, value: str) -> QuerySet[FabricEvent]:
        return queryset.filter(Q(subject__icontains=value) | Q(message__icontains=value))


class EventTable(ConsoleTable):
    opened_at = UtcTimeColumn(verbose_name="Opened (UTC)")
    severity = tables.Column(verbose_name="Severity")
    kind = tables.Column(verbose_name="Kind")
    status = tables.Column(verbose_name="Status")
    subject = tables.Column(verbose_name="Subject")
    message = tables.Column(verbose_name="Message")
    resolved_at = UtcTimeColumn(verbose_name="Resolved (UTC)")
    resolution = tables.Column(verbose_name="Resolution")

    class Meta(ConsoleTable.Meta):
        attrs = {**ConsoleTable.Meta.attrs, "data-testid": "event-table"}
        empty_text = "No events match."
        row_attrs = {
            "data-testid": "event-row",
            "data-event": lambda record: record.pk,
            "data-severity": lambda record: record.severity,
        }
        order_by = ("-opened_at",)

    def render_severity(self, record: FabricEvent) -> str:
        return format_html('<span class="status status-{}">{}</span>', record.severity, record.get_severity_display())

    def value_severity(self, record: FabricEvent) -> str:
        return record.get_severity_display()
