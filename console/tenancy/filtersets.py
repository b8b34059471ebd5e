"""Filtersets of the tenancy models, one per model, shared by the REST API and the console pages."""

import django_filters

from console.tenancy.models import ApiToken, AuditEntry, Membership


class AuditEntryFilter(django_filters.FilterSet):
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    action = django_filters.CharFilter(lookup_expr="startswith")

    class Meta:
        model = AuditEntry
        fields = ["tenant", "actor_kind", "object_type", "object_id", "correlation_id", "action"]


class MembershipFilter(django_filters.FilterSet):
    class Meta:
        model = Membership
        fields = ["tenant", "role"]


class ApiTokenFilter(django_filters.FilterSet):
    class Meta:
        model = ApiToken
        fields = ["tenant", "read_only"]
