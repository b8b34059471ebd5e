"""The tenants page's table and filters."""

from __future__ import annotations

import django_filters
import django_tables2 as tables
from django import forms
from django.db.models import Count, Q, QuerySet

from console.tenancy.models import Tenant
from console.web.tables import ConsoleTable, YesNoColumn


class TenantPageFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_text", label="Name or slug")
    is_active = django_filters.BooleanFilter(
        label="Active", widget=forms.Select(choices=[("", "any"), ("true", "yes"), ("false", "no")])
    )

    class Meta:
        model = Tenant
        fields = ["q", "is_active"]

    def filter_text(self, queryset: QuerySet[Tenant], name: str, value: str) -> QuerySet[Tenant]:
        return queryset.filter(Q(name__icontains=value) | Q(slug__icontains=value))


def with_members(queryset: QuerySet[Tenant]) -> QuerySet[Tenant]:
    return queryset.annotate(member_count=Count("memberships", distinct=True))


class TenantTable(ConsoleTable):
    name = tables.Column(verbose_name="Name")
    slug = tables.Column(verbose_name="Slug")
    is_active = YesNoColumn(verbose_name="Active")
    member_count = tables.Column(verbose_name="Members")
    created_at = tables.DateTimeColumn(verbose_name="Created (UTC)", format=r"Y-m-d H:i \U\T\C")

    class Meta(ConsoleTable.Meta):
        attrs = {**ConsoleTable.Meta.attrs, "data-testid": "tenant-table"}
        row_attrs = {"data-testid": "tenant-row", "data-tenant": lambda record: record.slug}
        order_by = ("name",)
