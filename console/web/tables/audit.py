"""The audit log page's table and filters: each entry as a sentence, the raw code in its own column."""

from __future__ import annotations

from typing import Any

import django_filters
import django_tables2 as tables
from django.db.models import Q, QuerySet
from django.utils.html import format_html

from console.fabric.models import Fabric
from console.tenancy.audit_words import fields, sentence
from console.tenancy.filtersets import AuditEntryFilter
from console.tenancy.models import AuditEntry, Principal, Tenant
from console.web.tables import ConsoleTable, label_empty_choices, scope_choices
from scheduling.models import Pool


class AuditPageFilter(AuditEntryFilter):
    """The API's audit filters plus free text; the tenant choices are the principal's tenants only."""

    q = django_filters.CharFilter(method="filter_text", label="Text")

    class Meta(AuditEntryFilter.Meta):
        fields = ["q", "action", "actor_kind", "tenant", "since", "until", "object_type", "correlation_id"]

    def __init__(self, data: Any, queryset: QuerySet[AuditEntry], principal: Principal) -> None:
        super().__init__(data, queryset=queryset)
        scope_choices(self, "tenant", Tenant.objects.visible_to(principal).order_by("name"))
        self.filters["action"].label = "Action code starts with"
        self.filters["since"].label = "Since (UTC)"
        self.filters["until"].label = "Until (UTC)"
        if not principal.sees_all_tenants:
            del self.filters["tenant"]  # a tenant's log is its own tenant's
        label_empty_choices(self)

    def filter_text(self, queryset: QuerySet[AuditEntry], name: str, value: str) -> QuerySet[AuditEntry]:
        return queryset.filter(
            Q(actor_label__icontains=value) | Q(object_repr__icontains=value) | Q(action__icontains=value)
        )


def names_for_words(principal: Principal) -> dict[str, dict[int, str]]:
    """Names by id of what audit data refers to by id (two queries, whatever the page holds).
    Fabrics are infrastructure tenants are not shown (their overview names none): for a tenant the
    sentences fall back to the wording without the fabric."""
    return {
        "pool": dict(Pool.objects.values_list("pk", "name")),
        "fabric": dict(Fabric.objects.values_list("pk", "name")) if principal.sees_all_tenants else {},
    }


def in_words(record: AuditEntry, names: dict[str, dict[int, str]]) -> str:
    """One entry as the sentence a person reads (the audit log and the overview's recent changes)."""
    values = fields(
        actor=record.actor_label,
        object_repr=record.object_repr,
        object_id=record.object_id,
        tenant=record.tenant.name if record.tenant else None,
        before=record.before,
        after=record.after,
        names=names,
    )
    return sentence(record.action, record.object_type, values)


class AuditTable(ConsoleTable):
    created_at = tables.DateTimeColumn(
        verbose_name="When (UTC)", format=r"Y-m-d H:i:s \U\T\C", attrs={"td": {"class": "nowrap"}}
    )
    what = tables.Column(
        verbose_name="What happened", empty_values=(), orderable=False, attrs={"td": {"class": "sentence"}}
    )
    action = tables.Column(verbose_name="Action code")
    actor_label = tables.Column(verbose_name="Actor")
    tenant = tables.Column(verbose_name="Tenant", accessor="tenant__name", default="—")
    # on screen the sentence names the object (the table fits the page); the CSV keeps type and id
    object_type = tables.Column(verbose_name="Object type", visible=False)
    object_id = tables.Column(verbose_name="Object id", default="", visible=False)
    correlation_id = tables.Column(verbose_name="Correlation id")

    class Meta(ConsoleTable.Meta):
        model = AuditEntry
        attrs = {**ConsoleTable.Meta.attrs, "data-testid": "audit-table"}
        fields = ("created_at", "what", "action", "actor_label", "tenant", "object_type", "object_id")
        sequence = (
            "created_at",
            "what",
            "action",
            "actor_label",
            "tenant",
            "object_type",
            "object_id",
            "...",
        )
        row_attrs = {"data-testid": "audit-row", "data-action": lambda record: record.action}

    def __init__(self, *args: Any, names: dict[str, dict[int, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.names = names

    def value_what(self, record: AuditEntry) -> str:
        return in_words(record, self.names)

    def render_what(self, record: AuditEntry) -> str:
        return self.value_what(record)

    def render_action(self, value: str) -> str:
        return format_html("<code>{}</code>", value)

    def value_action(self, value: str) -> str:
        return value

    def render_correlation_id(self, value: str) -> str:
        return format_html('<a href="?correlation_id={}"><code>{}</code></a>', value, value[:8])

    def value_correlation_id(self, value: str) -> str:
        return value
