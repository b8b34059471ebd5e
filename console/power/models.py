"""A node's BMC (how to reach it, credentials encrypted at rest) and its power history."""

from __future__ import annotations

from typing import ClassVar

from django.db import models

from console.power import crypto
from scheduling.models import Node


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
