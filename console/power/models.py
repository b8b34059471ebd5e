"""A node's BMC (how to reach it, credentials encrypted at rest) and its power history."""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from console.power import crypto
from scheduling.models import Node, Pool
from scheduling.power.policy import PowerPolicy


class Bmc(models.Model):
    """The baseboard management controller of one scheduling node."""

    class Driver(models.TextChoices):
        REDFISH = "redfish", "Redfish"
        IPMI = "ipmi", "IPMI"

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="bmc")
    driver = models.CharField(max_length=10, choices=Driver.choices, default=Driver.REDFISH)
    address = models.CharField(
        max_length=255, help_text="Redfish: base URL (https://bmc.example:443); IPMI: host or host:port"
    )
    username = models.CharField(max_length=64, blank=True)
    password_encrypted = models.TextField(blank=True, help_text="Fernet token (console.power.crypto)")
    system_id = models.CharField(
        max_length=255, blank=True, help_text="Redfish system path (/redfish/v1/Systems/<id>); empty: the only one"
    )
    verify_tls = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    #: never in an audit row
    audit_exclude: ClassVar[frozenset[str]] = frozenset({"password_encrypted"})

    class Meta:
        ordering = ["node"]

    def __str__(self) -> str:
        return f"{self.node.name} BMC ({self.driver} {self.address})"

    @property
    def password(self) -> str:
        """The plaintext password (only for the driver; never serialised)."""
        return crypto.decrypt(self.password_encrypted)

    @password.setter
    def password(self, plain: str) -> None:
        self.password_encrypted = crypto.encrypt(plain)


class PowerEvent(models.Model):
    """One power state change of a node: an action (intended) or an observation (a failure)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="power_events")
    from_state = models.CharField(max_length=12, choices=Node.Power.choices)
    to_state = models.CharField(max_length=12, choices=Node.Power.choices)
    at = models.DateTimeField()
    intended = models.BooleanField(help_text="an operator's or the policy's action (false: observed, e.g. a failure)")
    actor = models.CharField(max_length=200, help_text='user name, "policy" or "bmc"')
    reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["node", "-at"])]

    def __str__(self) -> str:
        return f"{self.node_id}: {self.from_state} → {self.to_state} at {self.at:%Y-%m-%d %H:%M:%S} UTC"


class PoolPowerPolicy(models.Model):
    """A pool's power policy as the operator set it (``scheduling.power.policy.PowerPolicy``'s
    fields, plus ``enabled``); a pool without a row has the defaults: disabled."""

    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, related_name="power_policy")
    enabled = models.BooleanField(default=False)
    dry_run = models.BooleanField(default=False)
    idle_after = models.DurationField(default=dt.timedelta(minutes=30))
    buffer_nodes = models.PositiveIntegerField(default=0)
    buffer_percent = models.FloatField(default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(100.0)])
    margin = models.DurationField(default=dt.timedelta(minutes=5))
    #: 0: no limit
    max_actions_per_minute = models.PositiveIntegerField(default=0)
    #: when it was last enabled: a node with no other sign of activity counts as idle from then
    enabled_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["pool"]

    def __str__(self) -> str:
        return f"power policy of {self.pool.name}"

    def as_policy(self, *, dry_run: bool | None = None) -> PowerPolicy:
        """The planner's policy (``dry_run``: overrides the stored one)."""
        return PowerPolicy(
            idle_after=self.idle_after,
            buffer_nodes=self.buffer_nodes,
            buffer_percent=self.buffer_percent,
            margin=self.margin,
            max_actions_per_minute=self.max_actions_per_minute,
            dry_run=self.dry_run if dry_run is None else dry_run,
        )


class PowerPin(models.Model):
    """A node pinned on by an operator: the policy powers it on if off and never powers it off."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="power_pin")
    pinned_by = models.CharField(max_length=200)
    pinned_at = models.DateTimeField()
    reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["node"]

    def __str__(self) -> str:
        return f"{self.node.name} pinned on"


class PolicyRun(models.Model):
    """One application of a pool's policy: what it did or, in a dry run, would have done.

    ``actions``: ``[{"node": name, "node_id": pk, "action": "on"|"off", "reason": …,
    "outcome": "done"|"would"|"refused", "error": …}]``."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="power_policy_runs")
    at = models.DateTimeField()
    dry_run = models.BooleanField()
    trigger = models.CharField(max_length=20, help_text='"schedule" (the minute task) or "operator"')
    actor = models.CharField(max_length=200)
    actions = models.JSONField(default=list, blank=True)
    summary = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["pool", "-at"])]

    def __str__(self) -> str:
        return f"{self.pool_id}: policy run at {self.at:%Y-%m-%d %H:%M:%S} UTC"
