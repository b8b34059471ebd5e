"""The node power page's history table: a node's PowerEvents, newest first (sort, filter, CSV)."""

from __future__ import annotations

import django_filters
import django_tables2 as tables
from django.db.models import QuerySet
from django.http import QueryDict
from django.utils.html import format_html

from console.power.models import PowerEvent
from console.tenancy.filtersets import UtcIsoDateTimeFilter
from console.web.tables import ConsoleTable, label_empty_choices
from console.web.tables.events import UtcTimeColumn
from console.web.templatetags.power import power_glyph, power_label
from scheduling.models import Node


class PowerEventFilter(django_filters.FilterSet):
    to_state = django_filters.ChoiceFilter(choices=Node.Power.choices, label="To")
    kind = django_filters.ChoiceFilter(
        choices=[("intended", "intended"), ("observed", "observed")], method="filter_kind", label="Kind"
    )
    since = UtcIsoDateTimeFilter(field_name="at", lookup_expr="gte", label="From (UTC)")
    until = UtcIsoDateTimeFilter(field_name="at", lookup_expr="lt", label="Before (UTC)")

    class Meta:
        model = PowerEvent
        fields = ["to_state", "kind", "since", "until"]

    def __init__(self, data: QueryDict, queryset: QuerySet[PowerEvent]) -> None:
        super().__init__(data, queryset=queryset)
        label_empty_choices(self)

    def filter_kind(self, queryset: QuerySet[PowerEvent], name: str, value: str) -> QuerySet[PowerEvent]:
        return queryset.filter(intended=value == "intended")


class PowerStateColumn(tables.Column):
    """A power state with its glyph and word on screen, its code in the CSV. Read from the record:
    django-tables2 hands a choice field's display text ("Powering Off") as the value."""

    def render(self, record: PowerEvent, bound_column: tables.columns.BoundColumn) -> str:
        state = getattr(record, bound_column.name)
        return format_html(
            '<span class="power power-{}"><span class="power-glyph" aria-hidden="true">{}</span> {}</span>',
            state,
            power_glyph(state),
            power_label(state),
        )

    def value(self, record: PowerEvent, bound_column: tables.columns.BoundColumn) -> str:
        return str(getattr(record, bound_column.name))


def _to_state(record: PowerEvent) -> str:
    return record.to_state


def _intended(record: PowerEvent) -> str:
    return "yes" if record.intended else "no"


class PowerEventTable(ConsoleTable):
    at = UtcTimeColumn(verbose_name="Time (UTC)")
    from_state = PowerStateColumn(verbose_name="From")
    to_state = PowerStateColumn(verbose_name="To")
    intended = tables.Column(verbose_name="Intended or observed")
    actor = tables.Column(verbose_name="Actor")
    reason = tables.Column(verbose_name="Reason")

    class Meta(ConsoleTable.Meta):
        attrs = {**ConsoleTable.Meta.attrs, "data-testid": "power-history"}
        empty_text = "No power changes recorded."
        row_attrs = {"data-testid": "power-event", "data-to": _to_state, "data-intended": _intended}
        order_by = ("-at",)

    def render_intended(self, value: bool) -> str:
        return "intended" if value else format_html('<span class="power-failed">{}</span>', "observed")

    def value_intended(self, value: bool) -> str:
        return "intended" if value else "observed"
