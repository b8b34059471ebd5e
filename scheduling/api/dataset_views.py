"""``/api/datasets/``: a tenant's datasets, each registered at a site; a request placed
``near: "dataset:<name>"`` goes to (or nearest to) that site. Tenants see and manage only their
own (another tenant's answers 404); operators see all and register for a tenant. Thin: every
write goes through :mod:`scheduling.services.datasets` (validation, audit)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.serializers import BaseSerializer

from console.fabric.models import Site
from console.tenancy.api.base import SlugField, TenantField, TenantScopedModelViewSet
from scheduling.models import Dataset
from scheduling.services import datasets


class DatasetSerializer(serializers.ModelSerializer):
    """A tenant's dataset at a site (``site``: the site's slug)."""

    tenant = TenantField(help_text="operators: the owning tenant (required); tenants: ignored, always their own")
    site = SlugField(slug_field="slug", queryset=Site.objects.all())
    size_tb = serializers.FloatField(min_value=0, required=False, default=0, help_text="terabytes (informational)")

    class Meta:
        model = Dataset
        fields = ["id", "tenant", "name", "site", "size_tb", "description", "created_at"]
        read_only_fields = ["id", "created_at"]
        # Names are unique per tenant, which the service knows (409); the tenant is not posted.
        validators: list[Any] = []


class DatasetViewSet(TenantScopedModelViewSet):
    """Datasets registered at sites, tenant-owned: a request ``near`` one lands at its site."""

    queryset = Dataset.objects.select_related("site", "tenant")
    serializer_class = DatasetSerializer
    filterset_fields = ["tenant", "site"]
    ordering_fields = ["name", "created_at", "size_tb"]

    def perform_create(self, serializer: BaseSerializer[Dataset]) -> None:
        data = dict(serializer.validated_data)
        data.pop("tenant", None)
        tenant = self.tenant_for_create(serializer)
        serializer.instance = datasets.register_dataset(self.actor, self.principal, tenant=tenant, **data)

    def perform_update(self, serializer: BaseSerializer[Dataset]) -> None:
        dataset = serializer.instance
        assert dataset is not None  # an update always has its object
        data = dict(serializer.validated_data)
        data.pop("tenant", None)  # ownership never moves
        serializer.instance = datasets.update_dataset(self.actor, self.principal, dataset, **data)

    def perform_destroy(self, instance: Dataset) -> None:
        datasets.delete_dataset(self.actor, self.principal, instance)
