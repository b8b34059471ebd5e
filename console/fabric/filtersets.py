"""Filtersets of the fabric models, one per model, shared by the REST API and the web pages.

``/api/fabrics/<id>/changes/?status=failed&opensm_restarted=true&ordering=-created_at`` and the
console's change-request list of that fabric read the same parameters through the same
:class:`ChangeRequestFilterSet`.
"""

from __future__ import annotations

import django_filters
from django import forms
from django.db import connection
from django.db.models import QuerySet

from console.fabric.models import ChangeRequest


def _yes_no_any() -> forms.Select:
    return forms.Select(choices=[("", "any"), ("true", "yes"), ("false", "no")])


class ChangeRequestFilterSet(django_filters.FilterSet):
    """Change requests by status (one or several), dry run, OpenSM restart and partition name;
    ordered by request or finish time (newest first unless asked otherwise)."""

    status = django_filters.MultipleChoiceFilter(
        choices=ChangeRequest.Status.choices, widget=forms.CheckboxSelectMultiple, label="Status"
    )
    dry_run = django_filters.BooleanFilter(widget=_yes_no_any(), label="Dry run")
    opensm_restarted = django_filters.BooleanFilter(
        method="filter_restarted",
        label="Restarted OpenSM",
        help_text="the push restarted OpenSM",
        widget=_yes_no_any(),
    )
    partition = django_filters.CharFilter(
        method="filter_partition",
        label="Partition",
        help_text="changes whose desired state carries this partition (by name, e.g. res-42)",
    )
    ordering = django_filters.OrderingFilter(
        fields=(("created_at", "created_at"), ("finished_at", "finished_at"), ("id", "id")),
        field_labels={"created_at": "Requested", "finished_at": "Finished", "id": "Id"},
    )

    class Meta:
        model = ChangeRequest
        fields = ["status", "dry_run"]

    def filter_restarted(self, queryset: QuerySet[ChangeRequest], name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        restarted = queryset.filter(outcome__opensm_restarted=True)
        return restarted if value else queryset.exclude(pk__in=restarted.values("pk"))

    def filter_partition(self, queryset: QuerySet[ChangeRequest], name: str, value: str) -> QuerySet:
        if not value:
            return queryset
        return queryset.filter(desired__partitions__contains=[{"name": value}])


def carrying_change(fabric_id: int, partition_name: str) -> ChangeRequest | None:
    """The change that carried a partition onto its fabric: the first applied (verified) one whose
    desired state names it; failing that, the latest one naming it (still pending, or failed:
    the operator sees why). Partition names are unique for all time (``res-<id>``), so the name
    alone ties a change to a reservation — a P_Key is reused once released. Two queries at most."""
    carrying = ChangeRequest.objects.filter(fabric_id=fabric_id, dry_run=False)
    if connection.features.supports_json_field_contains:
        carrying = carrying.filter(desired__partitions__contains=[{"name": partition_name}])
    else:  # SQLite (the embedded mode of `make run`) has no JSON containment: the same match in Python
        named = [
            pk
            for pk, desired in carrying.values_list("id", "desired")
            if any(p.get("name") == partition_name for p in (desired or {}).get("partitions", []))
        ]
        carrying = carrying.filter(id__in=named)
    carrying = carrying.only("id", "status", "created_at", "started_at", "finished_at", "fabric_id")
    applied = carrying.filter(status=ChangeRequest.Status.APPLIED).order_by("created_at", "id").first()
    return applied or carrying.order_by("-created_at", "-id").first()
