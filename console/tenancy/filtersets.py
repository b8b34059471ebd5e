"""Filtersets of the tenancy models, one per model, shared by the REST API and the console pages."""

import datetime as dt

import django_filters
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField

from console.tenancy.models import ApiToken, AuditEntry, Membership


class UtcIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 date-time, normalised to UTC: any offset Python accepts (up to ±24 h) is a
    valid instant, but PostgreSQL refuses displacements beyond ±15:59 in a literal."""

    def to_python(self, value: str | dt.datetime | dt.date | None) -> dt.datetime | None:
        parsed: dt.datetime | None = super().to_python(value)
        if parsed is None or parsed.tzinfo is None:
            return parsed
        try:
            return parsed.astimezone(dt.UTC)
        except OverflowError:  # before year 1 or after 9999 once in UTC
            raise ValidationError(self.error_messages["invalid"], code="invalid") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class AuditEntryFilter(django_filters.FilterSet):
    since = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
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
