"""Managed fabrics. A Fabric is one InfiniBand subnet, bound to a design revision and reached
through a driver (the ibsim lab, a local OpenSM host, or UFM). Fabrics live at sites (data
centres); sites are joined by links (IB routers or gateways, or Ethernet)."""

from __future__ import annotations

from typing import ClassVar

from django.db import models

from designer.models import DesignRevision


class Site(models.Model):
    """A data centre: one or more fabrics (subnets, each with its own SM), its own Celery queue
    (``site.<slug>``: its workers run there) and its own collectors. A fabric without a site is
    treated as a site of its own (single-site installations need not create one)."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=40, unique=True, help_text="names the site's worker queue: site.<slug>")
    description = models.TextField(blank=True)
    location = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def queue(self) -> str:
        """The Celery queue this site's workers consume."""
        return f"site.{self.slug}"


class SiteLink(models.Model):
    """How two sites are joined: the kind of link, its one-way latency and bandwidth (entered by
    an operator or measured). One row per unordered pair (``a`` < ``b``)."""

    class Kind(models.TextChoices):
        IB_ROUTER = "ib_router", "InfiniBand router"
        IB_GATEWAY = "ib_gateway", "InfiniBand gateway"
        ETHERNET = "ethernet", "Ethernet"

    class Source(models.TextChoices):
        ENTERED = "entered"
        MEASURED = "measured"

    a = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="+")
    b = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.ETHERNET)
    latency_us = models.FloatField(help_text="one-way latency, microseconds")
    bandwidth_gbps = models.FloatField(help_text="usable bandwidth between the sites, Gb/s")
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.ENTERED)
    measured_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["a", "b"]
        constraints = [
            models.UniqueConstraint(fields=["a", "b"], name="site_link_unique"),
            models.CheckConstraint(name="site_link_ordered", condition=models.Q(a__lt=models.F("b"))),
            models.CheckConstraint(
                name="site_link_positive", condition=models.Q(latency_us__gte=0, bandwidth_gbps__gt=0)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.a_id}–{self.b_id} ({self.kind})"


class Fabric(models.Model):
    """One managed subnet: what it should look like (a design revision) and how to reach it."""

    class Driver(models.TextChoices):
        LAB = "lab", "Lab (OpenSM on ibsim, through its agent)"
        OPENSM = "opensm", "OpenSM host"
        AGENT = "agent", "OpenSM host through its agent"
        UFM = "ufm", "NVIDIA UFM"

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    site = models.ForeignKey(Site, null=True, blank=True, on_delete=models.PROTECT, related_name="fabrics")
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
    # Set by a restore: nothing is pushed until an operator reviews and resumes (console.fabric.paused).
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_reason = models.CharField(max_length=300, blank=True)
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

    @staticmethod
    def paused_now(pk: int) -> bool:
        """Paused since a restore (console.fabric.paused), read now: an instance may predate it."""
        return Fabric.objects.filter(pk=pk, paused_at__isnull=False).exists()

    @property
    def through_agent(self) -> bool:
        """Its subnet-manager host is reached through an agent: ``driver=agent``, and a lab, whose
        SM host is one like any other (the console runs its ibsim and OpenSM, its agent does the
        rest)."""
        return self.driver in AGENT_DRIVERS


#: The drivers whose SM hosts are reached through agents.
AGENT_DRIVERS = (Fabric.Driver.AGENT, Fabric.Driver.LAB)


class FabricPartition(models.Model):
    """A partition the fabric should carry. Operators define some in the console
    (``source=manual``); reservations contribute theirs through scheduling
    (``source=reservation``); a *service* partition makes service hosts (storage, login nodes:
    ``members``, full) reachable from the reservations of ``allowed_tenants`` (limited members,
    added when desired state is built), so tenants reach their storage and not each other; an
    *operator* partition was found in the SM host's ``partitions.conf`` without the console having
    written it: kept exactly as written (``raw``), never removed or changed by a push."""

    class Source(models.TextChoices):
        MANUAL = "manual"
        RESERVATION = "reservation"
        SERVICE = "service"
        OPERATOR = "operator", "operator-owned (found on the SM host)"

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="partitions")
    name = models.CharField(max_length=64)
    pkey = models.PositiveIntegerField()
    sl = models.PositiveSmallIntegerField(default=0)
    ipoib = models.BooleanField(default=False)
    # OpenSM's ``indx0``: member ports hold this P_Key at index 0 of their tables (UFM's index0).
    indx0 = models.BooleanField(default=False)
    # [["0x0002c90300000101", "full"|"limited"|"both"], …] — port GUIDs or OpenSM keywords.
    members = models.JSONField(default=list)
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.MANUAL)
    tenant = models.ForeignKey("tenancy.Tenant", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # Service partitions: the tenants whose reservations' hosts join as limited members.
    allowed_tenants = models.ManyToManyField("tenancy.Tenant", blank=True, related_name="+")
    description = models.CharField(max_length=200, blank=True)
    # Operator partitions: the statement exactly as found in partitions.conf (comments included),
    # and whether an operator deleted it in the console (the next verified push drops it from the
    # file, then the row goes).
    raw = models.TextField(blank=True)
    removed = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["fabric", "pkey"]
        constraints = [
            models.UniqueConstraint(fields=["fabric", "pkey"], name="partition_pkey_unique"),
            models.UniqueConstraint(fields=["fabric", "name"], name="partition_name_unique"),
            models.CheckConstraint(name="partition_pkey_range", condition=models.Q(pkey__gte=1, pkey__lte=0x7FFE)),
        ]

    def __str__(self) -> str:
        return f"{self.name} (0x{self.pkey:04x})"

    @property
    def allowed_tenant_ids(self) -> list[int]:
        """The ids of ``allowed_tenants`` (service partitions), sorted."""
        return sorted(t.pk for t in self.allowed_tenants.all())


class FabricQos(models.Model):
    """The operators' QoS table of a fabric: priority class → SL, VL and arbitration weight, and
    the high-priority limit (the JSON of :class:`console.fabric.opensm.qos_table.QosTable`). No
    row = the default table."""

    fabric = models.OneToOneField(Fabric, on_delete=models.CASCADE, related_name="qos_table")
    table = models.JSONField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "fabric QoS table"

    def __str__(self) -> str:
        return f"QoS table of {self.fabric.name}"


class PortAdminState(models.Model):
    """A switch port the operator administers: down (isolated or unused), or up with an
    enabled link width / speed. ``width`` and ``speed`` are ibportstate codes (LinkWidthEnabled /
    LinkSpeedEnabled); null leaves the port's own setting alone."""

    class Width(models.IntegerChoices):
        W1X = 1, "1X"
        W4X = 2, "4X"
        W8X = 4, "8X"
        W12X = 8, "12X"
        W2X = 16, "2X"

    class Speed(models.IntegerChoices):
        SDR = 1, "2.5 Gbps"
        DDR = 2, "5.0 Gbps"
        QDR = 4, "10.0 Gbps"

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="port_admin")
    switch = models.CharField(max_length=64)
    port = models.PositiveSmallIntegerField()
    enabled = models.BooleanField(default=False)
    width = models.PositiveSmallIntegerField(null=True, blank=True, choices=Width.choices)
    speed = models.PositiveSmallIntegerField(null=True, blank=True, choices=Speed.choices)
    reason = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["fabric", "switch", "port"]
        constraints = [models.UniqueConstraint(fields=["fabric", "switch", "port"], name="port_admin_unique")]

    def __str__(self) -> str:
        return f"{self.switch}[{self.port}] {'up' if self.enabled else 'down'}"


class ChangeRequest(models.Model):
    """Desired state → rendered artefacts → diff → (approval) → apply → verify → outcome."""

    class Status(models.TextChoices):
        PENDING_APPROVAL = "pending_approval"
        QUEUED = "queued"
        APPLYING = "applying"
        VERIFYING = "verifying"
        APPLIED = "applied"  # verified on the fabric
        UNCHANGED = "unchanged"  # desired already applied: nothing to push
        PREVIEWED = "previewed"  # dry run: diff computed, nothing changed
        FAILED = "failed"  # refused (lint) or could not apply; live state untouched
        ROLLED_BACK = "rolled_back"  # applied, verification failed, last known good restored
        CANCELLED = "cancelled"

    TERMINAL = frozenset(
        {Status.APPLIED, Status.UNCHANGED, Status.PREVIEWED, Status.FAILED, Status.ROLLED_BACK, Status.CANCELLED}
    )

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="changes")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    dry_run = models.BooleanField(default=False)
    reason = models.CharField(max_length=200, blank=True)
    requested_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    requested_by_label = models.CharField(max_length=200, blank=True)
    approved_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    approved_at = models.DateTimeField(null=True, blank=True)
    correlation_id = models.CharField(max_length=64, blank=True)
    desired = models.JSONField(default=dict)  # partitions, qos, port admin: declarative
    artefacts = models.JSONField(default=dict)  # file name → rendered text
    diff = models.TextField(blank=True)  # unified diff against what is applied
    # A database lease: one worker at a time per change (and per fabric), expiring if it dies.
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    outcome = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["fabric", "status"])]

    def __str__(self) -> str:
        return f"change {self.pk} on {self.fabric} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def opensm_restarted(self) -> bool:
        """True when the push restarted OpenSM (not a SIGHUP): every SA client lost its state.
        The pipeline records it in the outcome when the change finishes."""
        return bool((self.outcome or {}).get("opensm_restarted"))


class ChangeStep(models.Model):
    """One step of a change on one target (render, lint, swap, reload, verify, rollback…)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        OK = "ok"
        FAILED = "failed"
        SKIPPED = "skipped"

    change = models.ForeignKey(ChangeRequest, on_delete=models.CASCADE, related_name="steps")
    seq = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=40)
    target = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    log = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["change", "seq"]
        constraints = [models.UniqueConstraint(fields=["change", "seq"], name="step_seq_unique")]

    def __str__(self) -> str:
        return f"{self.seq}. {self.name} {self.target} ({self.status})"


class AppliedState(models.Model):
    """What the fabric verifiably carries now (the last verified change's desired state)."""

    fabric = models.OneToOneField(Fabric, on_delete=models.CASCADE, related_name="applied")
    desired = models.JSONField(default=dict)
    artefacts = models.JSONField(default=dict)
    change = models.ForeignKey(ChangeRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    verified_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"applied state of {self.fabric_id}"


class DiscoveryRun(models.Model):
    """One ibnetdiscover sweep, and its comparison with the design and the routing check."""

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="discoveries")
    created_at = models.DateTimeField(auto_now_add=True)
    duration_s = models.FloatField(default=0)
    topology = models.JSONField(default=dict)  # discovered graph: nodes, links, GUIDs, LIDs, rates
    summary = models.JSONField(default=dict)
    compare = models.JSONField(default=dict)  # missing / extra / miswired links, mismatches, fixes
    routing = models.JSONField(default=dict)  # configured vs in-use routing engine, evidence

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"discovery {self.pk} of {self.fabric_id}"


class DiscoveryJob(models.Model):
    """A discovery asked for and run by a worker (through the fabric's agent): what it is doing
    now, and the run it stored. At most one is queued or running per fabric."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    ACTIVE = (State.QUEUED, State.RUNNING)

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="discovery_jobs")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    step = models.CharField(max_length=200, blank=True, help_text="what it is doing now, in words")
    error = models.TextField(blank=True)
    run = models.ForeignKey(DiscoveryRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    requested_by = models.JSONField(default=dict, help_text="the actor who asked (the run's audit names it)")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["fabric"], condition=models.Q(state__in=["queued", "running"]), name="discovery_job_one_active"
            )
        ]

    def __str__(self) -> str:
        return f"discovery job {self.pk} of {self.fabric_id} ({self.state})"


class WorkerHeartbeat(models.Model):
    """The last sign of life of the workers consuming one Celery queue (a site's ``site.<slug>``
    or the default queue): each worker writes it every ``SITE_HEARTBEAT_INTERVAL_S`` while it is
    connected to the broker (console/celery.py). A site whose queue's heartbeat is older than
    ``SITE_UNREACHABLE_AFTER_S`` is unreachable (:mod:`console.fabric.sites`)."""

    queue = models.CharField(max_length=60, unique=True)
    worker = models.CharField(max_length=200, help_text="the Celery node name that beat last")
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["queue"]

    def __str__(self) -> str:
        return f"{self.queue}: {self.worker} at {self.seen_at:%Y-%m-%d %H:%M:%S} UTC"


class FabricKeys(models.Model):
    """The fabric's management keys, generated per fabric and stored encrypted
    (:mod:`console.fabric.keys`): ``m_key`` (with its protection level and lease) so a host's
    owner cannot rewrite other ports' PortInfo or P_Key tables, ``sm_key`` so no other SM takes
    over, ``sa_key`` for the SA. Rendered into ``opensm.conf`` by every push; never returned by
    the API (operators see a fingerprint)."""

    fabric = models.OneToOneField(Fabric, on_delete=models.CASCADE, related_name="keys")
    m_key_encrypted = models.TextField()
    sm_key_encrypted = models.TextField()
    sa_key_encrypted = models.TextField()
    m_key_protection_level = models.PositiveSmallIntegerField(default=2)
    m_key_lease_period = models.PositiveIntegerField(default=60, help_text="seconds; 0 = never expires")
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)

    audit_exclude: ClassVar[frozenset[str]] = frozenset({"m_key_encrypted", "sm_key_encrypted", "sa_key_encrypted"})

    class Meta:
        verbose_name_plural = "fabric keys"
        constraints = [
            models.CheckConstraint(
                name="fabric_keys_protection_level", condition=models.Q(m_key_protection_level__lte=3)
            )
        ]

    def __str__(self) -> str:
        return f"keys of {self.fabric_id}"


class IsolationAudit(models.Model):
    """One run of the isolation audit of a fabric (:mod:`console.fabric.isolation`): SA
    PathRecords sampled between hosts of different tenants and free hosts, P_Key tables read,
    the partitions on the SM host checked against the isolation rule, its live files against what
    the console last wrote. The last few runs of each fabric are kept."""

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="isolation_audits")
    checked_at = models.DateTimeField()
    duration_s = models.FloatField(default=0)
    pairs_checked = models.PositiveIntegerField(default=0)
    ports_read = models.PositiveIntegerField(default=0)
    default_membership = models.CharField(max_length=10, blank=True, help_text="limited | full | mixed | unknown")
    leaks = models.JSONField(default=list, blank=True)
    findings = models.JSONField(default=list, blank=True)
    drift = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-checked_at", "-id"]
        indexes = [models.Index(fields=["fabric", "-checked_at"], name="isolation_audit_latest")]

    def __str__(self) -> str:
        return f"isolation audit {self.pk} of {self.fabric_id}: {len(self.leaks)} leaks"


class FabricAgent(models.Model):
    """The agent on one subnet-manager host of a fabric (``manage.py agent``): it connects out
    to the console, authenticates with its own token (only the hash is stored; an operator
    creates and revokes it) and alone touches OpenSM's files and the fabric's MADs on its host.
    What it last said of itself and of its OpenSM is kept here."""

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=64)
    prefix = models.CharField(max_length=12, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    host = models.CharField(max_length=200, blank=True, help_text="the SM host's name, as the agent reports it")
    version = models.CharField(max_length=40, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    connected = models.BooleanField(default=False)
    channel = models.CharField(max_length=120, blank=True, editable=False, help_text="the live socket's channel")
    sm_state = models.CharField(max_length=20, blank=True, help_text="its OpenSM's SMInfo state (MASTER, STANDBY…)")
    sm_priority = models.PositiveSmallIntegerField(null=True, blank=True)
    port_guid = models.CharField(max_length=18, blank=True, help_text="its OpenSM's port GUID")
    sm_activity = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="SMInfo's ActCount last reported: it starts again when OpenSM restarts"
    )
    config_hash = models.CharField(
        max_length=64, blank=True, help_text="hash of the files its OpenSM runs (per-host lines left out)"
    )
    conf_priority = models.PositiveSmallIntegerField(null=True, blank=True, help_text="sm_priority in its opensm.conf")
    master_since = models.DateTimeField(
        null=True, blank=True, help_text="when its OpenSM became MASTER after another state (a takeover)"
    )

    audit_exclude: ClassVar[frozenset[str]] = frozenset({"secret_hash", "channel"})

    class Meta:
        ordering = ["fabric", "name"]
        constraints = [models.UniqueConstraint(fields=["fabric", "name"], name="agent_name_unique")]

    def __str__(self) -> str:
        return f"agent {self.name} of {self.fabric_id}"
