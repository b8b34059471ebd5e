from __future__ import annotations

from rest_framework import serializers

from console.notify.models import EVENT_TYPES, Delivery, DeliveryAttempt, Preference, Webhook
from console.tenancy.api.base import TenantField

EVENT_CHOICES = [t for t in EVENT_TYPES if t != "webhook.test"]


class WebhookSerializer(serializers.ModelSerializer):
    """A webhook as read back: never its secret."""

    tenant = TenantField()
    events = serializers.ListField(child=serializers.ChoiceField(choices=EVENT_CHOICES), required=False)

    class Meta:
        model = Webhook
        fields = ["id", "tenant", "name", "url", "events", "is_active", "created_at", "updated_at"]
        read_only_fields = ["id", "created_at", "updated_at"]


class WebhookWriteSerializer(WebhookSerializer):
    """Create or change: ``secret`` is write-only (on create, omit it to have one generated)."""

    secret = serializers.CharField(
        write_only=True, required=False, allow_blank=True, min_length=16, max_length=200, trim_whitespace=False
    )

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]


class WebhookCreatedSerializer(WebhookSerializer):
    secret = serializers.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class DeliveryAttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeliveryAttempt
        fields = ["number", "started_at", "duration_ms", "http_status", "error", "ok", "next_retry_at"]
        read_only_fields = fields


class DeliverySerializer(serializers.ModelSerializer):
    event_id = serializers.UUIDField(source="event.id", read_only=True)
    event_type = serializers.CharField(source="event.type", read_only=True)
    payload = serializers.JSONField(source="event.payload", read_only=True)
    attempt_log = DeliveryAttemptSerializer(many=True, read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "event_id",
            "event_type",
            "status",
            "attempts",
            "next_retry_at",
            "created_at",
            "payload",
            "attempt_log",
        ]
        read_only_fields = fields


class PreferenceSerializer(serializers.ModelSerializer):
    class Meta:
        model = Preference
        fields = ["email_own", "email_tenant"]
