"""Inventory (nodes, GPUs, HCAs) bound to a fabric, pools, tenants' quotas and reservations.

Inventory rows are expanded from the fabric's design revision (``services.inventory``); the
placement engine never reads them directly: ``services.topology`` turns a pool into a plain
:class:`scheduling.placement.PoolTopology` once and caches it.

Double booking is impossible on PostgreSQL: every reserved GPU has a
:class:`ReservationAllocation` row and an exclusion constraint (``btree_gist``) forbids two rows
for one GPU with overlapping half-open windows. A reservation's P_Key is unique per fabric for as
long as it may be on the wire (``ReservationSubnet.pkey_live``, one row per fabric it touches),
again by a database constraint.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from django.conf import settings
from django.contrib.postgres.constraints import ExclusionConstraint
from django.db import models
from django.db.models.signals import post_save
from django.dispatch import receiver

from console.tenancy.models import TenantOwnedModel, TenantScopedQuerySet
from scheduling.db import EQUAL, OVERLAPS, TsTzRange


class Node(models.Model):
    """A GPU server of a fabric, bound to the designed node of the same name."""

    class State(models.TextChoices):
        AVAILABLE = "available"
        DRAINING = "draining"
        DOWN = "down"
        OFF = "off", "powered off"

    class Power(models.TextChoices):
        """What the BMC says (and the console is doing); independent of the operator's `state`."""

        ON = "on"
        POWERING_ON = "powering-on"
        OFF = "off"
        POWERING_OFF = "powering-off"
        FAILED = "failed"

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=64)
    node_type = models.CharField(max_length=40, blank=True)
    su = models.IntegerField(default=-1, help_text="scalable unit (-1: none)")
    rack = models.CharField(max_length=32, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.AVAILABLE)
    gpu_model = models.CharField(max_length=40, blank=True)
    gpus = models.PositiveSmallIntegerField(default=0)
    power_state = models.CharField(max_length=12, choices=Power.choices, default=Power.ON)
    power_changed_at = models.DateTimeField(null=True, blank=True)
    path_lost = models.CharField(
        max_length=200,
        blank=True,
        help_text="why the fabric cut this node off (set and cleared by the console: scheduling/services/node_paths.py)",
    )

    class Meta:
        ordering = ["fabric", "name"]
        constraints = [models.UniqueConstraint(fields=["fabric", "name"], name="node_name_unique")]

    def __str__(self) -> str:
        return self.name


class GPU(models.Model):
    """One GPU of a node; a failed GPU takes its node out of placement."""

    class Health(models.TextChoices):
        OK = "ok"
        DEGRADED = "degraded"
        FAILED = "failed"

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpu_set")
    index = models.PositiveSmallIntegerField()
    model = models.CharField(max_length=40, blank=True)
    memory_gb = models.PositiveIntegerField(default=0)
    health = models.CharField(max_length=10, choices=Health.choices, default=Health.OK)

    class Meta:
        ordering = ["node", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="gpu_index_unique")]
        # The few failed GPUs, read on every snapshot refresh (a scan of every GPU row otherwise).
        indexes = [models.Index(fields=["node"], name="gpu_failed_node", condition=models.Q(health="failed"))]

    def __str__(self) -> str:
        return f"{self.node_id}/gpu{self.index}"


class HCA(models.Model):
    """A compute HCA port of a node: its rail, its port GUID and the leaf port it is cabled to."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="hcas")
    index = models.PositiveSmallIntegerField(help_text="0-based node port (HCA) number")
    rail = models.SmallIntegerField(default=-1)
    port_guid = models.CharField(max_length=18, help_text="0x-prefixed, 16 hex digits")
    leaf = models.CharField(max_length=64, blank=True)
    leaf_port = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["node", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="hca_index_unique")]

    def __str__(self) -> str:
        return f"{self.node_id}/hca{self.index} {self.port_guid}"


class Pool(models.Model):
    """A named set of nodes that quotas and reservations refer to. ``fabric`` is its home fabric
    (names are unique per fabric); its nodes may belong to fabrics of several sites, and then a
    reservation lands on one site unless it allows spanning (:mod:`scheduling.placement.sites`)."""

    class Kind(models.TextChoices):
        BY_MODEL = "by_model", "by GPU model"
        BY_SU = "by_su", "by scalable unit"
        MANUAL = "manual"

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="pools")
    name = models.CharField(max_length=64)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.MANUAL)
    description = models.TextField(blank=True)
    nodes = models.ManyToManyField(Node, related_name="pools", blank=True)
    # Bumped on every membership change: cached topologies are keyed by it.
    version = models.PositiveIntegerField(default=1)
    # Patience of queued requests that do not give their own max_wait (None: no patience).
    default_max_wait = models.DurationField(
        null=True, blank=True, help_text="how long a queued request waits for a packed placement"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["fabric", "name"]
        constraints = [models.UniqueConstraint(fields=["fabric", "name"], name="pool_name_unique")]

    def __str__(self) -> str:
        return self.name


class BookingGeneration(models.Model):
    """Bumped by every change to the bookings of the pool's nodes (an upsert: its row lock orders
    the bumps as they commit); each bump writes :class:`BookingChange` rows. A row of its own, not
    a column of the pool, so that only writers of bookings ever wait on it."""

    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, primary_key=True, related_name="+")
    generation = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"pool {self.pool_id} bookings at {self.generation}"


@receiver(post_save, sender=Pool, dispatch_uid="scheduling.pool_lock_row")
def pool_lock_row(sender: type[Pool], instance: Pool, created: bool, **kwargs: Any) -> None:
    """Every pool has its :class:`BookingGeneration` row (its reservation lock,
    :mod:`scheduling.services.locks`) from the transaction that creates it on, however it is
    created (``Pool.objects.create`` in tests, seeds, imports, fixtures). ``bulk_create`` sends
    no signal: the lock creates a missing row itself."""
    if created:
        BookingGeneration.objects.bulk_create([BookingGeneration(pool_id=instance.pk)], ignore_conflicts=True)


class BookingChange(models.Model):
    """A reservation whose allocations on the pool's nodes changed at ``generation``: the deltas a
    process's cached pool snapshot applies (:mod:`scheduling.services.snapshots`). Not a foreign
    key to the reservation: the row outlives nothing and must never block a delete."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="booking_changes")
    generation = models.BigIntegerField()
    reservation_id = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["pool", "generation"], name="booking_change_pool_gen")]

    def __str__(self) -> str:
        return f"pool {self.pool_id} reservation {self.reservation_id} at {self.generation}"


class Dataset(TenantOwnedModel):
    """Data a tenant keeps at a site; a request ``near`` it is placed at (or nearest to) that site."""

    name = models.CharField(max_length=100)
    site = models.ForeignKey("fabric.Site", on_delete=models.PROTECT, related_name="datasets")
    size_tb = models.FloatField(default=0, help_text="terabytes (informational)")
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant", "name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="dataset_name_unique")]

    def __str__(self) -> str:
        return self.name


class PriorityClass(models.TextChoices):
    TRAINING = "training"
    INFERENCE = "inference"
    BEST_EFFORT = "best-effort"


#: The classes a new quota allows: inference (the high-priority VL table, the last to be preempted)
#: is an entitlement an operator grants (issue 33).
DEFAULT_QUOTA_CLASSES = (PriorityClass.TRAINING.value, PriorityClass.BEST_EFFORT.value)
#: Classes whose GPUs count against a quota's ``high_priority_gpus``.
HIGH_PRIORITY_CLASSES = frozenset({PriorityClass.INFERENCE.value})


def default_quota_classes() -> list[str]:
    return list(DEFAULT_QUOTA_CLASSES)


class GpuHourPrice(models.Model):
    """What one GPU-hour costs in a pool for one priority class (chargeback; unset: the setting's default)."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="prices")
    priority_class = models.CharField(max_length=12, choices=PriorityClass.choices)
    price = models.DecimalField(max_digits=10, decimal_places=4, help_text="per GPU-hour, in CONSOLE_CURRENCY")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pool", "priority_class"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "priority_class"], name="gpu_hour_price_unique"),
            models.CheckConstraint(name="gpu_hour_price_non_negative", condition=models.Q(price__gte=0)),
        ]

    def __str__(self) -> str:
        return f"{self.pool_id}/{self.priority_class}: {self.price}"


class ServiceLevels(models.Model):
    """The InfiniBand SL each priority class gets on one fabric (defaults from settings)."""

    fabric = models.OneToOneField("fabric.Fabric", on_delete=models.CASCADE, related_name="service_levels")
    training = models.PositiveSmallIntegerField(default=1)
    inference = models.PositiveSmallIntegerField(default=2)
    best_effort = models.PositiveSmallIntegerField(default=0)

    class Meta:
        verbose_name_plural = "service levels"
        constraints = [
            models.CheckConstraint(
                name="sl_range",
                condition=models.Q(training__lte=15, inference__lte=15, best_effort__lte=15),
            )
        ]

    def __str__(self) -> str:
        return f"SLs of fabric {self.fabric_id}"


class Quota(TenantOwnedModel):
    """A tenant's share of a pool: guaranteed GPUs plus a borrowing limit above them.

    Borrowed GPUs (beyond the guarantee) may be reclaimed when another tenant claims its
    guarantee. ``guaranteed_leaf_groups`` optionally shapes the guarantee as whole leaf groups
    (e.g. 2 SUs), so that it is always placeable. The reservation service locks this row first.
    """

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="quotas")
    guaranteed_gpus = models.PositiveIntegerField(default=0)
    borrow_limit_gpus = models.PositiveIntegerField(default=0)
    guaranteed_leaf_groups = models.PositiveSmallIntegerField(null=True, blank=True)
    classes = models.JSONField(
        default=default_quota_classes, help_text="the priority classes this quota allows its tenant to book"
    )
    high_priority_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="most GPUs held at once in high-priority classes (None: up to the limit)"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pool", "tenant"]
        constraints = [models.UniqueConstraint(fields=["tenant", "pool"], name="quota_tenant_pool_unique")]

    def __str__(self) -> str:
        return f"quota of {self.tenant_id} in {self.pool_id}"

    @property
    def limit_gpus(self) -> int:
        """Most GPUs the tenant may hold at once in the pool (guarantee + borrowing)."""
        return self.guaranteed_gpus + self.borrow_limit_gpus


class ReservationQuerySet(TenantScopedQuerySet):
    def live(self) -> ReservationQuerySet:
        """Reservations that hold (or will hold) their nodes."""
        return self.filter(status__in=Reservation.HOLDING)


class Reservation(TenantOwnedModel):
    """A gang of GPUs for a tenant over ``[start, end)``, with its own partition on the fabric.

    requested → placed → provisioning → ready → ending → released; or rejected (``reason``),
    preempted (borrowed capacity reclaimed, ``reason`` is the notice) or cancelled. An ``asap``
    request that does not fit now is ``queued`` (``estimated_start``, ``queue_position``) until a
    queue pass places it (→ provisioning) or it is cancelled.
    """

    class Status(models.TextChoices):
        REQUESTED = "requested"
        QUEUED = "queued"
        PLACED = "placed"
        PROVISIONING = "provisioning"
        READY = "ready"
        ENDING = "ending"
        RELEASED = "released"
        REJECTED = "rejected"
        PREEMPTED = "preempted"
        CANCELLED = "cancelled"

    #: States whose allocations hold nodes (quota usage counts these).
    HOLDING: ClassVar[tuple[str, ...]] = (Status.PLACED, Status.PROVISIONING, Status.READY)
    #: States a reservation never leaves (its life is over).
    FINISHED: ClassVar[tuple[str, ...]] = (Status.RELEASED, Status.REJECTED, Status.PREEMPTED, Status.CANCELLED)
    #: The longest window a reservation may span (reserve and extend both refuse longer ones).
    MAX_WINDOW: ClassVar[dt.timedelta] = dt.timedelta(days=90)

    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="reservations")
    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=100, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.REQUESTED)
    priority_class = models.CharField(max_length=12, choices=PriorityClass.choices, default=PriorityClass.TRAINING)
    # What was asked.
    requested_gpus = models.PositiveIntegerField(null=True, blank=True)
    requested_nodes = models.PositiveIntegerField(null=True, blank=True)
    gpu_model = models.CharField(max_length=40, blank=True)
    same_leaf = models.BooleanField(default=False)
    max_switch_hops = models.PositiveSmallIntegerField(null=True, blank=True)
    rail_aligned = models.BooleanField(default=False)
    # Where its data or users are (a site, or a dataset registered at a site), and whether the gang
    # may span sites (default: one site, the nearest that can hold it).
    near_site = models.ForeignKey("fabric.Site", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    near_dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    span_sites = models.BooleanField(default=False)
    # Parameters of registered constraint types without a column of their own (plug-ins): kept so
    # what was asked can be read back and applied again.
    constraint_params = models.JSONField(default=dict, blank=True)
    start = models.DateTimeField()
    end = models.DateTimeField()
    # What was granted.
    gpus = models.PositiveIntegerField(default=0)
    borrowed = models.BooleanField(default=False)
    # Its P_Key on its own fabric (the value NCCL_IB_PKEY takes; the same on every subnet it
    # touches where the ranges allow: ReservationSubnet has one row per subnet).
    pkey = models.PositiveIntegerField(null=True, blank=True)
    # True from allocation until every subnet it touches verified its P_Key gone. The uniqueness
    # of live P_Keys per fabric is ReservationSubnet's constraint (subnet_pkey_live_unique).
    pkey_live = models.BooleanField(default=False)
    sl = models.PositiveSmallIntegerField(default=0)
    # Virtual port GUIDs (pod VFs, from the reservation's vGUID range) its tenant added to the
    # P_Key through the UFM-compatible API: [["0x02c0ffee00007000", "full"], …].
    virtual_guids = models.JSONField(default=list, blank=True)
    placement = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True)
    explanation = models.JSONField(default=dict, blank=True)
    fabric_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # The queue (asap requests): when it was queued, how long it waits for a packed placement,
    # and what the last queue pass estimated.
    queued_at = models.DateTimeField(null=True, blank=True)
    max_wait = models.DurationField(null=True, blank=True)
    estimated_start = models.DateTimeField(null=True, blank=True)
    queue_position = models.PositiveIntegerField(null=True, blank=True)

    objects: ClassVar[models.Manager[Reservation]] = ReservationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["fabric", "status"]),
            models.Index(fields=["pool", "tenant", "status"]),
        ]
        constraints = [
            models.CheckConstraint(name="reservation_window_valid", condition=models.Q(end__gt=models.F("start"))),
            models.CheckConstraint(
                name="reservation_pkey_range",
                condition=models.Q(pkey__isnull=True) | models.Q(pkey__gte=1, pkey__lte=0x7FFE),
            ),
        ]

    def __str__(self) -> str:
        return self.partition_name

    @property
    def partition_name(self) -> str:
        """The partition's name on the fabric (``res-42``)."""
        return f"res-{self.pk}"


class ReservationSubnet(models.Model):
    """The reservation's P_Key on one subnet (fabric) it touches: one row per fabric, the
    reservation's own ``fabric`` included, so that a P_Key is unique among live keys of a fabric
    whichever reservation (single-fabric or spanning) holds it: one constraint, one table.
    ``pkey_live`` until that fabric verified the P_Key gone; ``verified_at`` once that fabric
    verified it on the member ports (the reservation is ready when every subnet is); ``sl``: the
    service level of the reservation's priority class on that fabric."""

    reservation = models.ForeignKey("Reservation", on_delete=models.CASCADE, related_name="subnets")
    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.PROTECT, related_name="+")
    pkey = models.PositiveIntegerField()
    pkey_live = models.BooleanField(default=True)
    sl = models.PositiveSmallIntegerField(default=0)
    verified_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["reservation", "fabric"]
        constraints = [
            models.UniqueConstraint(fields=["reservation", "fabric"], name="reservation_subnet_unique"),
            models.UniqueConstraint(
                fields=["fabric", "pkey"], condition=models.Q(pkey_live=True), name="subnet_pkey_live_unique"
            ),
            models.CheckConstraint(name="subnet_pkey_range", condition=models.Q(pkey__gte=1, pkey__lte=0x7FFE)),
        ]

    def __str__(self) -> str:
        return f"{self.reservation_id} on fabric {self.fabric_id}: 0x{self.pkey:04x}"


class ReservationAllocation(models.Model):
    """One GPU held by a reservation over ``[start, end)``; never two overlapping per GPU."""

    reservation = models.ForeignKey(Reservation, on_delete=models.CASCADE, related_name="allocations")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="+")
    gpu = models.ForeignKey(GPU, on_delete=models.PROTECT, related_name="+")
    start = models.DateTimeField()
    end = models.DateTimeField()

    class Meta:
        ordering = ["reservation", "node", "gpu"]
        indexes = [models.Index(fields=["node", "end"])]
        constraints = [
            models.CheckConstraint(name="allocation_window_valid", condition=models.Q(end__gt=models.F("start"))),
            # Created by a PostgreSQL-only migration operation (scheduling.db).
            ExclusionConstraint(
                name="allocation_no_double_booking",
                expressions=[("gpu", EQUAL), (TsTzRange("start", "end"), OVERLAPS)],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reservation_id}: gpu {self.gpu_id} [{self.start}, {self.end})"
