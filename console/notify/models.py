"""Webhooks, the events sent to them, each delivery and its attempts, and per-user e-mail choices."""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.conf import settings
from django.db import models

from console.tenancy.models import TenantOwnedModel, TenantScopedQuerySet

EVENT_TYPES = (
    "reservation.ready",
    "reservation.expiring",
    "reservation.preempted",
    "reservation.failed",
    "reservation.placed",
    "reservation.fabric_fault",
    "webhook.test",
)


def all_event_types() -> list[str]:
    """A webhook's default subscription: every reservation event."""
    return [t for t in EVENT_TYPES if t != "webhook.test"]


class Webhook(TenantOwnedModel):
    """A tenant's receiver: events of ``events`` are POSTed to ``url``, signed with its secret.
    The secret is stored encrypted (console.notify.signing: CONSOLE_WEBHOOK_KEY or a key derived from SECRET_KEY) and never returned."""

    name = models.CharField(max_length=100)
    url = models.URLField(max_length=500)
    secret_encrypted = models.TextField(editable=False)
    events = models.JSONField(default=all_event_types)
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    audit_exclude: ClassVar[frozenset[str]] = frozenset({"secret_encrypted"})

    class Meta:
        ordering = ["tenant_id", "name", "id"]

    def __str__(self) -> str:
        return f"webhook {self.name}"


class Event(TenantOwnedModel):
    """One notification: its payload is what every receiver gets (its ``id`` is the idempotency
    key). ``dedupe_key`` makes an event at most once (e.g. ``expiring`` per reservation)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    type = models.CharField(max_length=40)
    reservation_id = models.BigIntegerField(null=True, blank=True)
    owner_user_id = models.BigIntegerField(null=True, blank=True, help_text="the reservation's creator")
    payload = models.JSONField()
    dedupe_key = models.CharField(max_length=100, null=True, blank=True, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        # a reservation's faults in its history (scheduling.services.timeline)
        indexes = [models.Index(fields=["reservation_id", "type"], name="notify_event_reservation")]

    def __str__(self) -> str:
        return f"{self.type} {self.id}"


class Delivery(models.Model):
    """An event on its way to one webhook: pending → retrying → succeeded | failed."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RETRYING = "retrying"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_retry_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    tenant_lookup: ClassVar[str] = "webhook__tenant"
    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["webhook", "event"], name="notify_one_delivery_per_event")]

    def __str__(self) -> str:
        return f"delivery {self.pk} ({self.status})"


class DeliveryAttempt(models.Model):
    """One POST: its HTTP status (or the error), how long it took, and when the next try is due."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True)
    ok = models.BooleanField(default=False)
    next_retry_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="notify_attempt_number_once")]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}"


class Preference(models.Model):
    """A user's e-mail choices: about reservations they created (on unless turned off) and about
    every reservation of their tenant (off unless turned on). No row means the defaults."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify_preference")
    email_own = models.BooleanField(default=True)
    email_tenant = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"e-mail preferences of {self.user_id}"


class DemoSinkReceipt(models.Model):
    """Demo only: one POST the demo's built-in webhook receiver (``/demo/webhook-sink/``,
    :mod:`console.notify.demo_sink`) got, and whether its signature checked out."""

    received_at = models.DateTimeField(auto_now_add=True)
    event_id = models.CharField(max_length=64, blank=True)
    event_type = models.CharField(max_length=40, blank=True)
    verified = models.BooleanField()
    problem = models.CharField(max_length=200, blank=True, help_text="why the signature did not verify")
    payload = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-received_at", "-id"]

    def __str__(self) -> str:
        return f"demo sink receipt {self.pk} ({'verified' if self.verified else 'refused'})"
