"""Designs and their immutable revisions, and operators' catalogue overrides.

A revision stores the whole fabric graph as one JSON document (designer.serialize format) plus
its summary: the graph is always read and written whole (exports, canvas, diff, validation), so
one row per revision is both the simplest and the fastest shape; inventory binding (scheduling)
expands the nodes and ports it needs into rows of its own.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class Design(models.Model):
    """A named fabric design; its content lives in numbered, immutable revisions."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    topology = models.CharField(max_length=30)
    options = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    latest_revision = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ImmutableRevision(Exception):
    """Raised on an attempt to change a saved revision."""


class DesignRevision(models.Model):
    """One immutable version of a design's graph."""

    design = models.ForeignKey(Design, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    message = models.CharField(max_length=200, blank=True)
    graph = models.JSONField()
    summary = models.JSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    audit_exclude = frozenset({"graph"})

    class Meta:
        ordering = ["design", "number"]
        constraints = [models.UniqueConstraint(fields=["design", "number"], name="revision_number_unique")]

    def __str__(self) -> str:
        return f"{self.design.name} r{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise ImmutableRevision(f"revision {self} is immutable; save a new one")
        super().save(*args, **kwargs)


class CatalogueEntry(models.Model):
    """An operator's addition to or override of the built-in catalogue (prices, power, models)."""

    class Kind(models.TextChoices):
        SWITCH = "switch"
        NODE = "node"
        CABLE = "cable"
        TRANSCEIVER = "transceiver"

    kind = models.CharField(max_length=12, choices=Kind.choices)
    name = models.CharField(max_length=60)
    data = models.JSONField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "name"]
        constraints = [models.UniqueConstraint(fields=["kind", "name"], name="catalogue_unique")]

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"
