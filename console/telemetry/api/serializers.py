"""Serializers of fabric events (a tenant never sees other tenants' reservations or tenants) and
the documented shape of a switch's port table."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from console.telemetry.models import FabricEvent
from console.telemetry.services import event_body
from console.tenancy.models import Principal
from scheduling.models import Reservation


class FabricEventListSerializer(serializers.ListSerializer):
    """A page of events: which of their reservations a tenant may see comes from one query."""

    def to_representation(self, data: Any) -> list[Any]:
        rows = list(data.all() if hasattr(data, "all") else data)
        child = self.child
        assert isinstance(child, FabricEventSerializer)
        principal = child._principal()
        if principal is not None and not principal.sees_all_tenants and principal.tenant_id is not None:
            ids = {pk for event in rows for pk in event.reservations}
            own = Reservation.objects.filter(pk__in=ids, tenant_id=principal.tenant_id).values_list("pk", flat=True)
            self.context["own_reservations"] = set(own) if ids else set()
        return super().to_representation(rows)


class FabricEventSerializer(serializers.ModelSerializer):
    reservations = serializers.SerializerMethodField()
    tenants = serializers.SerializerMethodField()

    class Meta:
        model = FabricEvent
        fields = [
            "id",
            "fabric",
            "kind",
            "severity",
            "status",
            "subject",
            "message",
            "detail",
            "reservations",
            "tenants",
            "opened_at",
            "acknowledged_at",
            "resolved_at",
            "resolution",
        ]
        read_only_fields = fields
        list_serializer_class = FabricEventListSerializer

    def _principal(self) -> Principal | None:
        view = self.context.get("view")
        principal: Principal | None = getattr(view, "principal", None)
        return principal

    def get_reservations(self, obj: FabricEvent) -> list[int]:
        own = self.context.get("own_reservations")
        if own is not None:  # a tenant's page: its own reservations, looked up once for the page
            return [pk for pk in obj.reservations if pk in own]
        return event_body(obj, self._principal())["reservations"]

    def get_tenants(self, obj: FabricEvent) -> list[int]:
        principal = self._principal()
        if principal is None or not principal.sees_all_tenants:
            return [principal.tenant_id] if principal and principal.tenant_id else []
        return sorted(tenant.pk for tenant in obj.tenants.all())  # prefetched by the viewset


class PortPeerSerializer(serializers.Serializer):
    name = serializers.CharField()
    port = serializers.IntegerField()
    kind = serializers.CharField(help_text="switch or node")
    tier = serializers.CharField()


class SwitchPortSerializer(serializers.Serializer):
    """One port: its cable's far end, the designed rate and the link's live state as seen from
    this port (Tx/Rx are this port's; error counters are those of the measuring port)."""

    port = serializers.IntegerField()
    link = serializers.CharField(allow_null=True, help_text="telemetry link id (upper end)")
    measured_here = serializers.BooleanField(help_text="counters are read at this port")
    peer = PortPeerSerializer(allow_null=True)
    tier = serializers.CharField()
    cable = serializers.CharField()
    rate = serializers.CharField(help_text="designed width and speed, e.g. 4xNDR")
    gbps = serializers.IntegerField(allow_null=True)
    state = serializers.CharField(help_text="Active, Down, unknown (no live data) or free")
    up = serializers.BooleanField(allow_null=True)
    tx_bps = serializers.FloatField(allow_null=True)
    rx_bps = serializers.FloatField(allow_null=True)
    util = serializers.FloatField(allow_null=True)
    bucket = serializers.IntegerField(allow_null=True)
    # The serializer metaclass pops declared fields, so this field does not shadow `Serializer.errors`.
    errors = serializers.DictField(child=serializers.IntegerField(), help_text="last sweep")  # type: ignore[assignment]
    error_totals = serializers.DictField(child=serializers.IntegerField())
    xmit_wait = serializers.IntegerField(
        allow_null=True, help_text="congestion: PortXmitWait ticks per second over the last sweep"
    )


class SwitchPortsSerializer(serializers.Serializer):
    fabric = serializers.IntegerField()
    switch = serializers.CharField()
    tier = serializers.CharField()
    model = serializers.CharField()
    ports_total = serializers.IntegerField()
    group = serializers.CharField(help_text="the live group whose deltas update these rows")
    seq = serializers.IntegerField(help_text="that group's last sequence number")
    epoch = serializers.IntegerField(allow_null=True)
    at = serializers.FloatField(allow_null=True)
    collector = serializers.CharField(help_text="running or stopped")
    ports = SwitchPortSerializer(many=True)


class OverviewFabricSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    site = serializers.CharField(allow_null=True, help_text="slug of its site; null: a fabric without a site")
    sm_state = serializers.CharField(help_text="the master SM's state at the last check (MASTER, …) or unknown")
    links_down = serializers.IntegerField(
        help_text="links down in the live snapshot, not counting those of nodes powered off on purpose"
    )
    links_degraded = serializers.IntegerField(help_text="links below their designed width or speed (last discovery)")
    alarms_open = serializers.IntegerField(help_text="unresolved events")
    drift = serializers.IntegerField(help_text="missing, extra, miswired and mismatched links (last discovery)")
    validation = inline_serializer(
        "OverviewValidation",
        {
            "id": serializers.IntegerField(allow_null=True, help_text="the last finished validation run"),
            "ok": serializers.BooleanField(allow_null=True),
            "failed": serializers.ListField(child=serializers.CharField(), help_text="codes of the tests that failed"),
            "at": serializers.DateTimeField(allow_null=True),
        },
    )
    ports_isolated = serializers.IntegerField(help_text="ports the health policy has disabled (not yet restored)")


class OverviewGpusSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    allocated = serializers.IntegerField()
    free = serializers.IntegerField()
    down = serializers.IntegerField()


class OverviewReservationsSerializer(serializers.Serializer):
    provisioning = serializers.IntegerField()
    ready = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="reservations provisioning or ending whose partition push failed")


class OverviewChangesSerializer(serializers.Serializer):
    pending = serializers.IntegerField()
    failed = serializers.IntegerField()


class OverviewSerializer(serializers.Serializer):
    """The dashboard's figures. A tenant gets an empty ``fabrics`` list, its quota as ``gpus``,
    its own reservations, and its reservations' pending pushes and push failures as ``changes``."""

    fabrics = OverviewFabricSerializer(many=True)
    gpus = OverviewGpusSerializer()
    reservations = OverviewReservationsSerializer()
    changes = OverviewChangesSerializer()
