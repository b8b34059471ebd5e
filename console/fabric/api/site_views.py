"""Site endpoints: ``/api/sites/`` and ``/api/site-links/``.

Every user with a role reads sites and links (a site's name, location and links are not a
tenant's secret; a request names a site with ``near``). Operators write, through
:mod:`console.fabric.site_admin` (validation, audit). Which fabrics a site holds is the
operator's network: ``fabrics`` is listed for operators and auditors only (empty for tenants).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, viewsets
from rest_framework.serializers import BaseSerializer

from console.fabric import site_admin
from console.fabric.models import Site, SiteLink
from console.fabric.sites import reachability
from console.tenancy.api.base import GlobalResourceMixin, SlugField
from console.tenancy.permissions import principal_of


def sites_reachability() -> dict[int, dict[str, Any]]:
    """Every site's heartbeat (:func:`console.fabric.sites.reachability`: are its workers
    alive, do its SMs answer, changes waiting), read once per request."""
    return {pk: status.as_dict() for pk, status in reachability().items()}


#: What a tenant reads of a site's reachability (worker host names and SM names are the operator's).
TENANT_REACHABILITY = ("reachable", "last_seen")


class SiteSerializer(serializers.ModelSerializer):
    """A site: a data centre with its fabrics (subnets), its worker queue and reachability."""

    queue = serializers.CharField(read_only=True, help_text="the Celery queue its workers consume: site.<slug>")
    fabrics = serializers.SerializerMethodField(help_text="names of its fabrics (operators and auditors; else [])")
    reachability = serializers.SerializerMethodField(
        help_text="the site heartbeat (workers, SMs, changes waiting; tenants: reachable and last_seen only)"
    )

    class Meta:
        model = Site
        fields = ["id", "name", "slug", "description", "location", "queue", "fabrics", "reachability", "created_at"]
        read_only_fields = ["id", "created_at"]

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_fabrics(self, site: Site) -> list[str]:
        request = self.context.get("request")
        if request is None or not principal_of(request).sees_all_tenants:
            return []
        return [f.name for f in site.fabrics.all()]

    @extend_schema_field(serializers.JSONField(allow_null=True))
    def get_reachability(self, site: Site) -> dict[str, Any] | None:
        statuses = self.context.get("reachability")
        status = None if statuses is None else statuses.get(site.pk)
        request = self.context.get("request")
        if status is not None and (request is None or not principal_of(request).sees_all_tenants):
            return {key: status[key] for key in TENANT_REACHABILITY}
        return status


class SiteLinkSerializer(serializers.ModelSerializer):
    """How two sites are joined. ``a`` and ``b`` are site slugs in any order: the link is stored
    (and shown) with ``a`` the site of the lower id."""

    a = SlugField(slug_field="slug", queryset=Site.objects.all())
    b = SlugField(slug_field="slug", queryset=Site.objects.all())
    latency_us = serializers.FloatField(min_value=0, help_text="one-way latency, microseconds")
    bandwidth_gbps = serializers.FloatField(help_text="usable bandwidth, Gb/s (more than 0)")

    class Meta:
        model = SiteLink
        fields = ["id", "a", "b", "kind", "latency_us", "bandwidth_gbps", "source", "measured_at", "updated_at"]
        read_only_fields = ["id", "updated_at"]
        # The pair's uniqueness holds in either order: the service normalises, then answers 409.
        validators: list[Any] = []


class SiteViewSet(GlobalResourceMixin, viewsets.ModelViewSet):
    """Sites (data centres). Everyone with a role reads; operators create, change and delete (a
    site that still holds fabrics or datasets answers 409)."""

    global_reason = "a site is the operator's data centre; its name is no tenant's secret"
    read_roles = None
    queryset = Site.objects.prefetch_related("fabrics")
    serializer_class = SiteSerializer
    filterset_fields = ["slug"]
    ordering_fields = ["name", "created_at"]

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "reachability": sites_reachability()}

    def perform_create(self, serializer: BaseSerializer[Site]) -> None:
        serializer.instance = site_admin.create_site(self.actor, self.principal, **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[Site]) -> None:
        site = serializer.instance
        assert site is not None  # an update always has its object
        serializer.instance = site_admin.update_site(self.actor, self.principal, site, **serializer.validated_data)

    def perform_destroy(self, instance: Site) -> None:
        site_admin.delete_site(self.actor, self.principal, instance)


class SiteLinkViewSet(GlobalResourceMixin, viewsets.ModelViewSet):
    """Links between sites: kind (IB router, IB gateway, Ethernet), latency and bandwidth,
    entered or measured. Everyone with a role reads (placement explains itself with them);
    operators write."""

    global_reason = "links join the operator's sites; placement explains itself to tenants with them"
    read_roles = None
    queryset = SiteLink.objects.select_related("a", "b")
    serializer_class = SiteLinkSerializer
    filterset_fields = ["kind", "source"]
    ordering_fields = ["latency_us", "bandwidth_gbps", "updated_at"]

    def perform_create(self, serializer: BaseSerializer[SiteLink]) -> None:
        data = dict(serializer.validated_data)
        serializer.instance = site_admin.create_link(self.actor, self.principal, **data)

    def perform_update(self, serializer: BaseSerializer[SiteLink]) -> None:
        link = serializer.instance
        assert link is not None  # an update always has its object
        data = dict(serializer.validated_data)
        serializer.instance = site_admin.update_link(self.actor, self.principal, link, **data)

    def perform_destroy(self, instance: SiteLink) -> None:
        site_admin.delete_link(self.actor, self.principal, instance)
