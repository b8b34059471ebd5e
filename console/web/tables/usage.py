"""The usage page's window form and table: one row per tenant, pool, reservation, UTC day or site, with
GPU-hours, borrowed GPU-hours, cost, preemptions and use of the guarantee (CSV from the same table)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import django_tables2 as tables
from django import forms
from django.db.models import QuerySet

from console.tenancy.models import Tenant
from console.web.tables import ConsoleTable
from scheduling.usage import GroupBy

GROUP_LABELS = {
    GroupBy.TENANT: "Tenant",
    GroupBy.POOL: "Pool",
    GroupBy.RESERVATION: "Reservation",
    GroupBy.DAY: "Day (UTC)",
    GroupBy.SITE: "Site",
}


ISO_DATE = ["%Y-%m-%d"]
ISO_DATE_ATTRS = {
    "placeholder": "YYYY-MM-DD",
    "pattern": r"\d{4}-\d{2}-\d{2}",
    "inputmode": "numeric",
    "size": "10",
    "aria-describedby": "usage-window-help",
}


class UsageWindowForm(forms.Form):
    """The window selector: ``[from, to)`` in whole UTC days, a grouping, and (operators) a tenant."""

    # ISO dates typed as text, never the browser's date picker: that one shows the reader's locale
    # (11/03/2026 is the 3rd of November to some, the 11th of March to others) and local days,
    # while the window is in whole UTC days.
    start = forms.DateField(
        label="From (UTC)", required=False, input_formats=ISO_DATE, widget=forms.DateInput(ISO_DATE_ATTRS, "%Y-%m-%d")
    )
    end = forms.DateField(
        label="To (UTC, not included)",
        required=False,
        input_formats=ISO_DATE,
        widget=forms.DateInput(ISO_DATE_ATTRS, "%Y-%m-%d"),
    )
    group_by = forms.ChoiceField(
        label="Group by", choices=[(g.value, GROUP_LABELS[g]) for g in GroupBy], required=False
    )
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none(), required=False, label="Tenant", empty_label="all")

    def __init__(self, data: Any, *, tenants: QuerySet[Tenant] | None) -> None:
        super().__init__(data)
        if tenants is None:
            del self.fields["tenant"]
        else:
            field = self.fields["tenant"]
            assert isinstance(field, forms.ModelChoiceField)
            field.queryset = tenants

    def window(self, today: dt.date) -> tuple[dt.datetime, dt.datetime, GroupBy, int | None]:
        """The chosen window (default: the 30 UTC days up to and including today)."""
        data = self.cleaned_data if self.is_valid() else {}
        end_day: dt.date = data.get("end") or today + dt.timedelta(days=1)
        if end_day.year < 2 or end_day.year > 9998:
            end_day = today + dt.timedelta(days=1)  # no window reaches the ends of the calendar
        start_day: dt.date = data.get("start") or end_day - dt.timedelta(days=30)
        tenant = data.get("tenant")
        return (
            dt.datetime.combine(start_day, dt.time(), dt.UTC),
            dt.datetime.combine(end_day, dt.time(), dt.UTC),
            GroupBy(data.get("group_by") or GroupBy.TENANT),
            tenant.pk if tenant is not None else None,
        )


class HoursColumn(tables.Column):
    def render(self, value: float) -> str:
        return f"{value:,.1f}"

    def value(self, value: float) -> str:
        return f"{value:.3f}"


class UsageTable(ConsoleTable):
    name = tables.Column(verbose_name="Group")
    gpu_hours = HoursColumn(verbose_name="GPU-hours")
    borrowed_gpu_hours = HoursColumn(verbose_name="Borrowed GPU-hours")
    cost = tables.Column(verbose_name="Cost")
    preemptions = tables.Column(verbose_name="Preemptions")
    reservations = tables.Column(verbose_name="Reservations")
    guaranteed_utilisation = tables.Column(verbose_name="Guarantee used", empty_values=())

    class Meta(ConsoleTable.Meta):
        attrs = {**ConsoleTable.Meta.attrs, "data-testid": "usage-table"}
        empty_text = "No GPU-hours in this window."
        row_attrs = {"data-testid": "usage-row"}

    def __init__(self, data: list[dict[str, Any]], *, group_label: str, currency: str, **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.columns["name"].column.verbose_name = group_label
        self.columns["cost"].column.verbose_name = f"Cost ({currency})"

    def render_cost(self, value: str) -> str:
        return f"{Decimal(value):,.2f}"

    def render_name(self, record: dict[str, Any]) -> str:
        if "reservation" not in record:
            return str(record["name"])
        return f"{record['name']} · {record['tenant_name']} · {record['pool_name']} · {record['gpus']} GPUs"

    def render_guaranteed_utilisation(self, value: float | None) -> str:
        return "–" if value is None else f"{value:.1%}"  # the page's tile says it the same way

    def value_guaranteed_utilisation(self, value: float | None) -> str:
        return "" if value is None else f"{value:.4f}"
