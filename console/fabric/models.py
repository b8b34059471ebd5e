"""Managed fabrics. A Fabric is one InfiniBand subnet, bound to a design revision and reached
through a driver (the ibsim lab, a local OpenSM host, or UFM)."""

from __future__ import annotations

from django.db import models

from designer.models import DesignRevision


class Fabric(models.Model):
    """One managed subnet: what it should look like (a design revision) and how to reach it."""

    class Driver(models.TextChoices):
        LAB = "lab", "Lab (OpenSM on ibsim)"
        OPENSM = "opensm", "OpenSM host"
        UFM = "ufm", "NVIDIA UFM"

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    driver = models.CharField(max_length=10, choices=Driver.choices, default=Driver.LAB)
    revision = models.ForeignKey(DesignRevision, on_delete=models.PROTECT, related_name="fabrics")
    # Driver settings: lab workdir and socket, OpenSM file paths, UFM URL and credentials name.
    config = models.JSONField(default=dict, blank=True)
    approval_required = models.BooleanField(
        default=False, help_text="changes need an operator other than the requester to approve"
    )
    # P_Keys handed to reservations come from this range and are never reused while live.
    pkey_min = models.PositiveIntegerField(default=0x0100)
    pkey_max = models.PositiveIntegerField(default=0x7FFE)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                name="fabric_pkey_range_valid",
                condition=models.Q(pkey_min__gte=1)
                & models.Q(pkey_max__lte=0x7FFE)
                & models.Q(pkey_min__lte=models.F("pkey_max")),
            )
        ]

    def __str__(self) -> str:
        return self.name
