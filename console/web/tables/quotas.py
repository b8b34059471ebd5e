"""The quotas page's table and filters: every tenant × pool, guaranteed and borrowable GPUs with
usage; operators edit a row in place (its inputs belong to the row's form, the Save column's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import django_filters
import django_tables2 as tables
from django.db.models import QuerySet
from django.middleware.csrf import get_token
from django.utils.html import format_html, format_html_join

from console.tenancy.models import Tenant
from console.web.tables import ConsoleTable, label_empty_choices
from scheduling.models import DEFAULT_QUOTA_CLASSES, Pool, PriorityClass, Quota


def gpus(value: int | None) -> str:
    return "–" if value is None else f"{value} GPU{'' if value == 1 else 's'}"


class QuotaPageFilter(django_filters.FilterSet):
    """Tenant and pool drop-downs; the page builds its grid from the chosen ones."""

    tenant = django_filters.ModelChoiceFilter(queryset=Tenant.objects.order_by("name"), label="Tenant")
    pool = django_filters.ModelChoiceFilter(queryset=Pool.objects.order_by("name"), label="Pool")

    class Meta:
        model = Tenant
        fields = ["tenant", "pool"]

    def __init__(self, data: Any) -> None:
        super().__init__(data, queryset=Tenant.objects.none())
        label_empty_choices(self)

    def narrow(self, pools: QuerySet[Pool], tenants: QuerySet[Tenant]) -> tuple[QuerySet[Pool], QuerySet[Tenant]]:
        if not self.is_valid():
            return pools.none(), tenants.none()
        chosen = self.form.cleaned_data
        if chosen.get("pool"):
            pools = pools.filter(pk=chosen["pool"].pk)
        if chosen.get("tenant"):
            tenants = tenants.filter(pk=chosen["tenant"].pk)
        return pools, tenants


class GpuColumn(tables.Column):
    """A GPU figure with its unit on screen and in the CSV ("32 GPUs"); sorted by the number."""

    def render(self, value: int | None) -> str:
        return gpus(value)

    def value(self, value: int | None) -> str:
        return gpus(value)


class QuotaTable(ConsoleTable):
    pool = tables.Column(accessor="pool_name", verbose_name="Pool")
    capacity = GpuColumn(verbose_name="Pool capacity")
    tenant = tables.Column(accessor="tenant_name", verbose_name="Tenant")
    guaranteed = GpuColumn(verbose_name="Guaranteed (GPUs)", empty_values=())
    borrowable = GpuColumn(verbose_name="Borrowable (GPUs)", empty_values=())
    leaf_groups = tables.Column(verbose_name="Whole leaf groups", empty_values=())
    classes = tables.Column(verbose_name="Priority classes", empty_values=(), orderable=False)
    high_priority = GpuColumn(verbose_name="Inference GPUs at most", empty_values=())
    used = GpuColumn(verbose_name="Used now", empty_values=())
    headroom = GpuColumn(verbose_name="Headroom", empty_values=())
    save = tables.Column(verbose_name="", empty_values=(), orderable=False)

    screen_only = ("save",)

    class Meta(ConsoleTable.Meta):
        attrs = {**ConsoleTable.Meta.attrs, "data-testid": "quota-editor"}
        empty_text = "No pools yet (manage.py schedule pool create …)."
        row_attrs = {
            "data-testid": "quota-row",
            "data-tenant": lambda record: record["tenant_slug"],
            "data-pool": lambda record: record["pool_name"],
        }
        order_by = ("pool", "tenant")

    def __init__(self, data: list[dict[str, Any]], *, can_write: bool, **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.can_write = can_write

    @staticmethod
    def _form(record: dict[str, Any]) -> str:
        return f"quota-{record['pool_id']}-{record['tenant_id']}"

    def _input(self, record: dict[str, Any], name: str, label: str, testid: str, value: object, size: int) -> str:
        return format_html(
            '<input name="{}" type="number" min="0" size="{}" aria-label="{}" form="{}" data-testid="{}" value="{}">',
            name,
            size,
            label,
            self._form(record),
            testid,
            value,
        )

    def render_guaranteed(self, record: dict[str, Any]) -> str:
        if not self.can_write:
            return gpus(record["guaranteed"])
        value = record["guaranteed"] or 0
        return self._input(record, "guaranteed_gpus", "guaranteed GPUs", "quota-guaranteed", value, 6)

    def render_borrowable(self, record: dict[str, Any]) -> str:
        if not self.can_write:
            return gpus(record["borrowable"])
        value = record["borrowable"] or 0
        return self._input(record, "borrow_limit_gpus", "borrowable GPUs", "quota-borrow", value, 6)

    def value_guaranteed(self, record: dict[str, Any]) -> str:
        return gpus(record["guaranteed"])

    def value_borrowable(self, record: dict[str, Any]) -> str:
        return gpus(record["borrowable"])

    def render_leaf_groups(self, record: dict[str, Any]) -> str:
        groups = record["leaf_groups"]
        if not self.can_write:
            return "–" if groups is None else str(groups)
        label = "guaranteed whole leaf groups"
        return self._input(record, "guaranteed_leaf_groups", label, "quota-leaf-groups", groups or "", 3)

    def value_leaf_groups(self, record: dict[str, Any]) -> str:
        return "" if record["leaf_groups"] is None else str(record["leaf_groups"])

    def render_classes(self, record: dict[str, Any]) -> str:
        allowed = record["classes"]
        if not self.can_write:
            return ", ".join(allowed)
        return format_html_join(
            " ",
            '<label class="inline"><input type="checkbox" name="classes" value="{}" form="{}" '
            'data-testid="quota-class-{}"{}> {}</label>',
            ((cls, self._form(record), cls, " checked" if cls in allowed else "", cls) for cls in PriorityClass.values),
        )

    def value_classes(self, record: dict[str, Any]) -> str:
        return " ".join(record["classes"])

    def render_high_priority(self, record: dict[str, Any]) -> str:
        value = record["high_priority"]
        if not self.can_write:
            return "up to the limit" if value is None else gpus(value)
        label = "most GPUs held at once in inference (empty: up to the limit)"
        return self._input(
            record, "high_priority_gpus", label, "quota-high-priority", "" if value is None else value, 5
        )

    def value_high_priority(self, record: dict[str, Any]) -> str:
        return "" if record["high_priority"] is None else str(record["high_priority"])

    def render_used(self, record: dict[str, Any]) -> str:
        if record["used"] is None:
            return format_html('<span class="muted">no quota</span>')
        return gpus(record["used"])

    def value_used(self, record: dict[str, Any]) -> str:
        return gpus(record["used"])

    def render_save(self, record: dict[str, Any]) -> str:
        if not self.can_write:
            return ""
        token = get_token(self.request)
        return format_html(
            '<form method="post" class="inline" id="{}"><input type="hidden" name="csrfmiddlewaretoken" value="{}">'
            '<input type="hidden" name="tenant" value="{}"><input type="hidden" name="pool" value="{}">'
            '<button type="submit" data-testid="quota-save">Save</button></form>',
            self._form(record),
            token,
            record["tenant_id"],
            record["pool_id"],
        )


def quota_row(
    pool: Pool, tenant: Tenant, quota: Quota | None, usages: Mapping[int, Mapping[str, int]]
) -> dict[str, Any]:
    """One row of the grid: ``pool`` annotated with ``capacity_gpus``; figures None without a quota."""
    usage = usages[quota.pk] if quota else None
    return {
        "pool_id": pool.pk,
        "pool_name": pool.name,
        "capacity": getattr(pool, "capacity_gpus", None) or 0,
        "tenant_id": tenant.pk,
        "tenant_name": tenant.name,
        "tenant_slug": tenant.slug,
        "guaranteed": quota.guaranteed_gpus if quota else None,
        "borrowable": quota.borrow_limit_gpus if quota else None,
        "leaf_groups": quota.guaranteed_leaf_groups if quota else None,
        "classes": list(quota.classes) if quota else list(DEFAULT_QUOTA_CLASSES),
        "high_priority": quota.high_priority_gpus if quota else None,
        "used": usage["used_gpus"] if usage else None,
        "headroom": usage["headroom_gpus"] if usage else None,
    }
