"""Filtersets of the scheduling models, one per model, shared by the REST API and the web pages.

The API's ``/api/reservations/?status=&pool=&tenant=&priority_class=`` and the operators'
"All reservations" page take the same query parameters because they read them through the
same :class:`ReservationFilterSet`.
"""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from console.tenancy.models import Tenant
from scheduling.models import Pool, Reservation


class ReservationFilterSet(django_filters.FilterSet):
    """Reservations by status, pool, tenant and priority class (exact matches).

    The choices are ordered by name because the page shows them as drop-downs; the API accepts
    any primary key of an existing row, as before.
    """

    tenant = django_filters.ModelChoiceFilter(queryset=Tenant.objects.order_by("name"))
    pool = django_filters.ModelChoiceFilter(queryset=Pool.objects.order_by("name"))
    status = django_filters.ChoiceFilter(choices=Reservation.Status.choices, empty_label="any")
    state = django_filters.ChoiceFilter(
        choices=[("live", "live (not over yet)"), ("finished", "finished")],
        method="filter_state",
        empty_label="any",
        label="Live or finished",
    )

    class Meta:
        model = Reservation
        fields = ["status", "state", "pool", "tenant", "priority_class"]

    def filter_state(self, queryset: QuerySet[Reservation], name: str, value: str) -> QuerySet[Reservation]:
        """``finished``: released, rejected, preempted or cancelled; ``live``: any other."""
        finished = queryset.filter(status__in=Reservation.FINISHED)
        return finished if value == "finished" else queryset.exclude(status__in=Reservation.FINISHED)
