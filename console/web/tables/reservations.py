"""The reservation lists' table and filters: the operator's "All reservations" and a tenant's own list."""

from __future__ import annotations

from typing import Any

import django_filters
import django_tables2 as tables
from django.db.models import Q, QuerySet
from django.urls import reverse
from django.utils.html import format_html

from console.tenancy.filtersets import UtcIsoDateTimeFilter
from console.tenancy.models import Principal, Tenant
from console.web.tables import ConsoleTable, label_empty_choices, scope_choices
from scheduling.filtersets import ReservationFilterSet
from scheduling.models import Pool, Reservation


class ReservationPageFilter(ReservationFilterSet):
    """The API's reservation filters, free text and a time range; choices scoped to the principal."""

    q = django_filters.CharFilter(method="filter_text", label="Name or partition")
    since = UtcIsoDateTimeFilter(field_name="end", lookup_expr="gt", label="Ending after (UTC)")
    until = UtcIsoDateTimeFilter(field_name="start", lookup_expr="lt", label="Starting before (UTC)")

    class Meta(ReservationFilterSet.Meta):
        fields = ["q", "status", "state", "pool", "tenant", "priority_class", "since", "until"]

    def __init__(self, data: Any, queryset: QuerySet[Reservation], principal: Principal) -> None:
        super().__init__(data, queryset=queryset)
        scope_choices(self, "tenant", Tenant.objects.visible_to(principal).order_by("name"))
        scope_choices(self, "pool", Pool.objects.order_by("name"))
        if not principal.sees_all_tenants:
            del self.filters["tenant"]  # a tenant lists its own reservations only
        label_empty_choices(self)

    def filter_text(self, queryset: QuerySet[Reservation], name: str, value: str) -> QuerySet[Reservation]:
        match = Q(name__icontains=value)
        number = value.strip().lower().removeprefix("res-")
        if number.isdigit():  # a partition name (res-42) or a reservation id
            match |= Q(pk=int(number))
        return queryset.filter(match)


class ReservationTable(ConsoleTable):
    name = tables.Column(verbose_name="Reservation", order_by=("name", "pk"))
    partition_name = tables.Column(verbose_name="Partition", orderable=False)
    tenant = tables.Column(accessor="tenant__name", verbose_name="Tenant")
    pool = tables.Column(accessor="pool__name", verbose_name="Pool")
    status = tables.Column(verbose_name="Status")
    gpus = tables.Column(verbose_name="GPUs")
    nodes = tables.Column(verbose_name="Nodes", empty_values=(), orderable=False)
    pkey = tables.Column(verbose_name="P_Key")
    sl = tables.Column(verbose_name="SL")
    start = tables.DateTimeColumn(verbose_name="Start (UTC)", format=r"Y-m-d H:i \U\T\C")
    end = tables.DateTimeColumn(verbose_name="End (UTC)", format=r"Y-m-d H:i \U\T\C")

    class Meta(ConsoleTable.Meta):
        attrs = {**ConsoleTable.Meta.attrs, "data-testid": "all-reservations"}
        empty_text = "No reservations match."
        row_attrs = {
            "data-testid": "all-row",
            "data-reservation": lambda record: record.pk,
            "data-status": lambda record: record.status,
        }
        order_by = ("-start",)

    def render_name(self, record: Reservation) -> str:
        url = reverse("web:reservation", args=[record.pk])
        return format_html('<a href="{}">{}</a>', url, record.name or record.partition_name)

    def value_name(self, record: Reservation) -> str:
        return record.name or record.partition_name

    def render_status(self, record: Reservation) -> str:
        reason = format_html('<div class="muted small">{}</div>', record.reason) if record.reason else ""
        return format_html('<span class="status status-{}">{}</span>{}', record.status, record.status, reason)

    def value_status(self, record: Reservation) -> str:
        return record.status

    def render_gpus(self, record: Reservation) -> int | str:
        return record.gpus or record.requested_gpus or "–"

    def value_gpus(self, record: Reservation) -> int:
        return record.gpus or record.requested_gpus or 0

    def render_nodes(self, record: Reservation) -> int:
        return len((record.placement or {}).get("nodes", []))

    def value_nodes(self, record: Reservation) -> int:
        return self.render_nodes(record)

    def render_pkey(self, value: int) -> str:
        return format_html("<code>{}</code>", f"0x{value:04x}")

    def value_pkey(self, value: int | None) -> str:
        return "" if value is None else f"0x{value:04x}"
