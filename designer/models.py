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


class ImportJob(models.Model):
    """An ibnetdiscover import too large to parse in a web request (``CONSOLE_IMPORT_INLINE_BYTES``),
    run by a worker: what it is doing now (``step``, ``percent``), and the design it made or why it
    failed. The input is kept until the job ends, then dropped (the design holds what came in)."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    ACTIVE = (State.QUEUED, State.RUNNING)

    name = models.CharField(max_length=100, help_text="the design it makes")
    description = models.TextField(blank=True)
    text = models.TextField(blank=True, help_text="the dump, until the job ends")
    node_name_map = models.TextField(blank=True)
    host_types = models.TextField(blank=True)
    size_bytes = models.PositiveBigIntegerField(default=0)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    step = models.CharField(max_length=200, blank=True, help_text="what it is doing now, in words")
    percent = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    fields = models.JSONField(default=dict, blank=True, help_text="the input field each error is about")
    design = models.ForeignKey(Design, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    requested_by = models.JSONField(default=dict, help_text="the actor who asked (the design's audit names it)")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    audit_exclude = frozenset({"text", "node_name_map", "host_types"})

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import job {self.pk} ({self.name}, {self.state})"
