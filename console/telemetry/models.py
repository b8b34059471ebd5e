"""Telemetry rows: link samples (raw and minute averages) and fabric events with their lifecycle.

Samples are written by the collector at ``TELEMETRY_STORE_INTERVAL_S`` (averages over the sweeps
in between), folded into minute averages and pruned by ``telemetry.prune`` (raw kept
``TELEMETRY_RAW_RETENTION_S``, minutes ``TELEMETRY_MINUTE_RETENTION_S``).
"""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models

from console.tenancy.models import TenantScopedQuerySet


class LinkSample(models.Model):
    """One link's averaged rates and error deltas over a storage interval (raw) or a minute."""

    class Resolution(models.IntegerChoices):
        RAW = 0, "raw"
        MINUTE = 60, "minute"

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="+")
    link_id = models.CharField(max_length=80)
    switch = models.CharField(max_length=64)
    tier = models.CharField(max_length=20, blank=True)
    resolution = models.PositiveSmallIntegerField(choices=Resolution.choices, default=0)
    at = models.DateTimeField()
    tx_bps = models.FloatField(default=0)
    rx_bps = models.FloatField(default=0)
    util = models.FloatField(default=0)
    errors = models.PositiveIntegerField(default=0)
    #: the errors by counter (raw samples; only the counters that rose): the health policy's preview
    error_counts = models.JSONField(default=dict, blank=True)
    up = models.BooleanField(default=True)

    class Meta:
        ordering = ["fabric", "link_id", "at"]
        indexes = [
            models.Index(fields=["fabric", "resolution", "link_id", "at"], name="sample_link_at"),
            models.Index(fields=["fabric", "resolution", "at"], name="sample_fabric_at"),
        ]

    def __str__(self) -> str:
        return f"{self.link_id} @ {self.at:%H:%M:%S}"


class EventQuerySet(TenantScopedQuerySet):
    def unresolved(self) -> EventQuerySet:
        return self.exclude(status=FabricEvent.Status.RESOLVED)


class FabricEvent(models.Model):
    """Something an operator must know: a link down, errors over threshold, routing fallback,
    an SM state change or a failed push. open → acknowledged → resolved; conditions that clear
    by themselves (a link back up) resolve automatically. ``tenants`` are the tenants whose
    reservations it affects (a tenant sees only those events)."""

    class Kind(models.TextChoices):
        LINK_DOWN = "link_down"
        LINK_ERRORS = "link_errors"
        ROUTING_FALLBACK = "routing_fallback"
        SM_STATE = "sm_state"
        PUSH_FAILED = "push_failed"
        MEMBER_ABSENT = "member_absent"  # a partition's member port is not on the fabric
        ISOLATION_LEAK = "isolation_leak"  # two tenants' hosts can reach each other
        CONFIG_DRIFT = "config_drift"  # the SM host's files differ from what the console wrote
        AGENT_SILENT = "agent_silent"  # an SM host's agent has not been heard from in its period
        WIRE_DRIFT = "wire_drift"  # the ports lost what was verified on them: pushed again
        SM_TAKEOVER = "sm_takeover"  # a standby subnet manager took over as master
        LINK_FLAPPING = "link_flapping"  # a link that keeps dropping: one alarm with its history

    class Severity(models.TextChoices):
        INFO = "info"
        WARNING = "warning"
        CRITICAL = "critical"

    class Status(models.TextChoices):
        OPEN = "open"
        ACKNOWLEDGED = "acknowledged"
        RESOLVED = "resolved"

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.WARNING)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.OPEN)
    subject = models.CharField(max_length=100, help_text="link id, change id or 'sm'")
    message = models.CharField(max_length=300)
    detail = models.JSONField(default=dict, blank=True)
    reservations = models.JSONField(default=list, blank=True)
    tenants = models.ManyToManyField("tenancy.Tenant", blank=True, related_name="+")
    opened_at = models.DateTimeField()
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolution = models.CharField(max_length=200, blank=True)

    tenant_lookup: ClassVar[str] = "tenants"
    objects = EventQuerySet.as_manager()

    class Meta:
        ordering = ["-opened_at", "-id"]
        indexes = [models.Index(fields=["fabric", "status"], name="event_fabric_status")]
        constraints = [
            # One unresolved event per condition: a flapping link re-opens, never duplicates.
            models.UniqueConstraint(
                fields=["fabric", "kind", "subject"],
                condition=~models.Q(status="resolved"),
                name="event_one_unresolved_per_subject",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.subject} ({self.status})"


class ValidationRun(models.Model):
    """One run of the fabric validation suite (:mod:`console.telemetry.validation`): asked for by
    an operator (the API, the fabric page, ``manage.py fabric validate``) or the schedule, run by
    a worker through the fabric's agent. ``verdicts``: one per test (``code``, ``title``,
    ``status`` pass/fail/skip, ``count``, ``offenders``, ``fix``, ``seconds``). At most one is
    queued or running per fabric."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    ACTIVE = (State.QUEUED, State.RUNNING)

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    step = models.CharField(max_length=200, blank=True, help_text="what it is doing now, in words")
    trigger = models.CharField(max_length=20, default="api", help_text="api, page, cli or schedule")
    error = models.TextField(blank=True)
    ok = models.BooleanField(null=True, help_text="every test passed (None until done)")
    verdicts = models.JSONField(default=list, blank=True)
    discovery = models.ForeignKey(
        "fabric.DiscoveryRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_by = models.JSONField(default=dict, help_text="the actor who asked")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["fabric"], condition=models.Q(state__in=["queued", "running"]), name="validation_one_active"
            )
        ]

    def __str__(self) -> str:
        return f"validation {self.pk} of fabric {self.fabric_id} ({self.state})"

    @property
    def failed(self) -> list[str]:
        """The codes of the tests that failed."""
        return failed_codes(self.verdicts)


def failed_codes(verdicts: list[dict]) -> list[str]:
    """The codes of the verdicts that failed (``status`` ``fail``)."""
    return [v["code"] for v in verdicts if v.get("status") == "fail"]


class PortHealthPolicy(models.Model):
    """A fabric's health policy (:mod:`console.telemetry.health_policy`) as operators set it:
    ``document`` is :meth:`~console.telemetry.health_policy.Policy.as_json`. A fabric without
    one runs the default (dry run)."""

    fabric = models.OneToOneField("fabric.Fabric", on_delete=models.CASCADE, related_name="+")
    document = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"health policy of fabric {self.fabric_id}"


class PortDecision(models.Model):
    """What the health policy decided about one port, when and why: the readings that caused it
    and the reservations whose traffic crossed the port (by the switches' forwarding tables). In
    dry run the decision is recorded and nothing changes; otherwise ``change`` is the change that
    disabled (or re-enabled) the port."""

    class Kind(models.TextChoices):
        ISOLATE = "isolate"
        CAPPED = "capped"  # would isolate, but the cap of isolated ports was reached
        RESTORE = "restore"

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="+")
    switch = models.CharField(max_length=64)
    port = models.PositiveSmallIntegerField()
    link = models.CharField(max_length=300, blank=True, help_text="the link, both ends named")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    dry_run = models.BooleanField()
    reasons = models.JSONField(default=list)
    samples = models.JSONField(default=list, help_text="the readings that caused it")
    reservations = models.JSONField(default=list, help_text="[{id, tenant}] whose traffic crossed the port")
    change = models.ForeignKey(
        "fabric.ChangeRequest", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    error = models.CharField(max_length=300, blank=True, help_text="why it could not be applied")
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["fabric", "-at"], name="port_decision_fabric_at")]

    def __str__(self) -> str:
        return f"{self.kind} {self.switch}/{self.port}"
