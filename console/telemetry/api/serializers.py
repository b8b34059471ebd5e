"""Serializers of fabric events (a tenant never sees other tenants' reservations or tenants)."""

from __future__ import annotations

from rest_framework import serializers

from console.telemetry.models import FabricEvent
from console.telemetry.services import event_body


class FabricEventSerializer(serializers.ModelSerializer):
    reservations = serializers.SerializerMethodField()
    tenants = serializers.SerializerMethodField()

    class Meta:
        model = FabricEvent
        fields = ["id", "fabric", "kind", "severity", "status", "subject", "message", "detail",
                  "reservations", "tenants", "opened_at", "acknowledged_at", "resolved_at",
                  "resolution"]  # fmt: skip
        read_only_fields = fields

    def _principal(self):
        view = self.context.get("view")
        return getattr(view, "principal", None)

    def get_reservations(self, obj: FabricEvent) -> list[int]:
        return event_body(obj, self._principal())["reservations"]

    def get_tenants(self, obj: FabricEvent) -> list[int]:
        principal = self._principal()
        if principal is None or not principal.sees_all_tenants:
            return [principal.tenant_id] if principal and principal.tenant_id else []
        return sorted(obj.tenants.values_list("pk", flat=True))
