"""Serializers of the fabric API: fabrics, partitions, change requests with their steps."""

from __future__ import annotations

from rest_framework import serializers

from console.fabric.models import (
    ChangeRequest,
    ChangeStep,
    Fabric,
    FabricPartition,
    PortAdminState,
    Site,
)
from console.tenancy.api.base import SlugField

TERMINAL_STEP = {"ok", "failed", "skipped"}


class FabricSerializer(serializers.ModelSerializer):
    """A managed subnet and how it is reached. ``config`` never holds secrets, only their names."""

    # Explicit bounds: the schema must not depend on the database backend's integer ranges.
    pkey_min = serializers.IntegerField(min_value=1, max_value=0x7FFE, required=False)
    pkey_max = serializers.IntegerField(min_value=1, max_value=0x7FFE, required=False)
    site = SlugField(
        slug_field="slug",
        queryset=Site.objects.all(),
        allow_null=True,
        required=False,
        help_text="slug of the site (data centre) it is at; null: a site of its own",
    )

    class Meta:
        model = Fabric
        fields = [
            "id",
            "name",
            "description",
            "site",
            "driver",
            "revision",
            "config",
            "approval_required",
            "pkey_min",
            "pkey_max",
            "created_at",
        ]
        read_only_fields = ["id", "created_at"]


class PartitionSerializer(serializers.ModelSerializer):
    """A partition of the fabric's desired state. ``pkey`` accepts ``"0x0003"`` or 3."""

    pkey = serializers.CharField(help_text="0x0001-0x7ffe, e.g. 0x0003")
    members = serializers.ListField(
        child=serializers.JSONField(),
        help_text='["0x0002c90300002001=full", ["0x…", "limited"], …]',
    )
    sl = serializers.IntegerField(required=False, default=0, min_value=0, max_value=15)
    ipoib = serializers.BooleanField(required=False, default=False)
    allowed_tenants = serializers.ListField(
        child=serializers.JSONField(),
        required=False,
        source="allowed_tenant_ids",
        help_text="service partitions: tenant ids or slugs whose reservations' hosts reach the service hosts (limited members)",
    )
    raw = serializers.CharField(
        required=False, help_text="operator partitions: the text as written in partitions.conf (PATCH to edit it)"
    )

    class Meta:
        model = FabricPartition
        fields = [
            "id",
            "fabric",
            "name",
            "pkey",
            "sl",
            "ipoib",
            "members",
            "source",
            "tenant",
            "allowed_tenants",
            "description",
            "raw",
            "removed",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "fabric", "tenant", "removed", "created_at", "updated_at"]
        extra_kwargs = {
            "source": {
                "required": False,
                "help_text": "write: manual (default) or service; read: also reservation, and operator "
                "(found on the SM host, kept as written)",
            }
        }

    def to_representation(self, instance: FabricPartition) -> dict:
        data = super().to_representation(instance)
        data["pkey"] = f"{instance.pkey:#06x}"
        data["source"] = instance.source
        return data


class PortAdminSerializer(serializers.ModelSerializer):
    """How one switch port should be: enabled or disabled, and optionally its enabled link
    width and speed. ``width``/``speed`` accept a name or the ibportstate code and are shown by
    name; null leaves the port's own setting alone."""

    port = serializers.IntegerField(min_value=1, max_value=255)
    enabled = serializers.BooleanField(required=False, default=True)
    width = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        help_text="1X, 4X, 8X, 12X or 2X (or the ibportstate code 1, 2, 4, 8, 16); null: unset",
    )
    speed = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        help_text="2.5, 5.0 or 10.0 Gbps (or the ibportstate code 1, 2, 4); null: unset",
    )
    reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")

    class Meta:
        model = PortAdminState
        fields = ["id", "fabric", "switch", "port", "enabled", "width", "speed", "reason", "updated_at"]
        read_only_fields = ["id", "fabric", "updated_at"]

    def to_representation(self, instance: PortAdminState) -> dict:
        data = super().to_representation(instance)
        data["width"] = instance.get_width_display() if instance.width is not None else None
        data["speed"] = instance.get_speed_display() if instance.speed is not None else None
        return data


class ChangeStepSerializer(serializers.ModelSerializer):
    """One step of a change on one target."""

    seq = serializers.IntegerField(read_only=True)

    class Meta:
        model = ChangeStep
        fields = ["seq", "name", "target", "status", "log", "started_at", "finished_at", "duration_s"]


class ChangeSerializer(serializers.ModelSerializer):
    """A change request: desired state, diff, status, steps and a progress estimate."""

    steps = ChangeStepSerializer(many=True, read_only=True)
    attempts = serializers.IntegerField(read_only=True)
    progress = serializers.SerializerMethodField()
    is_terminal = serializers.BooleanField(read_only=True)
    opensm_restarted = serializers.BooleanField(read_only=True, help_text="the push restarted OpenSM")

    class Meta:
        model = ChangeRequest
        fields = [
            "id",
            "fabric",
            "status",
            "is_terminal",
            "dry_run",
            "reason",
            "requested_by",
            "requested_by_label",
            "approved_by",
            "approved_at",
            "correlation_id",
            "diff",
            "artefacts",
            "desired",
            "attempts",
            "outcome",
            "opensm_restarted",
            "error",
            "created_at",
            "started_at",
            "finished_at",
            "progress",
            "steps",
        ]
        read_only_fields = fields

    def get_progress(self, change: ChangeRequest) -> dict:
        """Finished steps out of those expected (render, lint, swap, reload, verify …)."""
        steps = list(change.steps.all())
        done = sum(1 for s in steps if s.status in TERMINAL_STEP)
        if change.is_terminal:
            return {"done": done, "total": done, "percent": 100}
        expected = 6 + len(change.desired.get("port_admin", []))
        if (change.desired.get("qos") or {}).get("classes"):
            expected += 2
        total = max(expected, len(steps) + 1)
        return {"done": done, "total": total, "percent": int(100 * done / total)}


class ChangeListSerializer(ChangeSerializer):
    """A change in a list (no artefacts or desired state)."""

    class Meta(ChangeSerializer.Meta):
        fields = [
            "id",
            "fabric",
            "status",
            "is_terminal",
            "dry_run",
            "reason",
            "requested_by_label",
            "attempts",
            "opensm_restarted",
            "error",
            "created_at",
            "finished_at",
            "progress",
        ]
        read_only_fields = fields


class ChangeCreateSerializer(serializers.Serializer):
    """Ask for a push of the fabric's desired state (or only its diff)."""

    dry_run = serializers.BooleanField(default=False)
    reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class QosClassSerializer(serializers.Serializer):
    """One priority class's row of the QoS table."""

    sl = serializers.IntegerField(help_text="service level 0-15 (NCCL_IB_SL / UCX_IB_SL of its jobs)")
    vl = serializers.IntegerField(help_text="virtual lane the SL maps to, below max_vls")
    table = serializers.ChoiceField(choices=["high", "low"], help_text="VL arbitration table the VL sits in")
    weight = serializers.IntegerField(help_text="arbitration weight 0-255, in units of 64 bytes")


class QosTableSerializer(serializers.Serializer):
    """The QoS table: one row per priority class (training, inference, best-effort)."""

    max_vls = serializers.IntegerField(required=False, default=8, help_text="qos_max_vls: 1, 2, 4, 8 or 15")
    high_limit = serializers.IntegerField(
        required=False,
        default=4,
        help_text="qos_high_limit: 4 KB units of high-priority traffic before a "
        "low-priority packet may go; 255 = unbounded",
    )
    classes = serializers.DictField(child=QosClassSerializer(), help_text="priority class → row")


class QosSwitchPortsSerializer(serializers.Serializer):
    name = serializers.CharField()
    ports = serializers.IntegerField()


class QosAffectedSerializer(serializers.Serializer):
    switch_ports = serializers.IntegerField(help_text="cabled switch ports whose SL2VL/VLArb tables are reprogrammed")
    hca_ports = serializers.IntegerField()
    switches = QosSwitchPortsSerializer(many=True)


class QosViewSerializer(serializers.Serializer):
    """A fabric's QoS table, what it renders to, and what a push of it would change."""

    fabric = serializers.IntegerField()
    is_default = serializers.BooleanField(help_text="no table saved: the default applies")
    table = QosTableSerializer()
    default = QosTableSerializer()
    rendered = serializers.DictField(child=serializers.CharField(), help_text="the opensm.conf qos_* options")
    affected_ports = QosAffectedSerializer()
    pending_diff = serializers.CharField(
        help_text="unified diff of the desired artefacts against the applied ones ('' = nothing to push)"
    )


class IsolationPortSerializer(serializers.Serializer):
    """One end of a leak: the port, its host's name in the design, who holds it."""

    guid = serializers.CharField()
    name = serializers.CharField()
    owner = serializers.CharField(help_text="tenant:<id>, service:<name> or free")
    reservation = serializers.IntegerField(allow_null=True, required=False)


class IsolationLeakSerializer(serializers.Serializer):
    """Two hosts that must not talk and had an SA path (``pkey``: the path's P_Key)."""

    a = IsolationPortSerializer()
    b = IsolationPortSerializer()
    pkey = serializers.CharField(allow_null=True)
    message = serializers.CharField()


class IsolationSerializer(serializers.Serializer):
    """The fabric's last isolation audit (``GET /api/fabrics/{id}/isolation/``)."""

    checked_at = serializers.DateTimeField(allow_null=True)
    duration_s = serializers.FloatField(required=False)
    pairs_checked = serializers.IntegerField(help_text="host pairs whose SA PathRecord was asked for")
    ports_read = serializers.IntegerField(help_text="P_Key tables read")
    leaks = IsolationLeakSerializer(many=True)
    findings = serializers.ListField(
        child=serializers.DictField(), help_text="what ports or files carry that they must not, with the fix"
    )
    drift = serializers.DictField(
        child=serializers.CharField(), help_text="file → diff from what the console last wrote to the SM host's copy"
    )
    default_membership = serializers.CharField(
        help_text="limited | full | mixed | unknown: the hosts' Default partition"
    )
    error = serializers.CharField(help_text="why the audit could not ask the fabric ('' = it could)")


class AgentSerializer(serializers.Serializer):
    """An agent of the fabric and its OpenSM, as it last reported (``connected``: it heartbeats)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    host = serializers.CharField()
    version = serializers.CharField()
    last_seen = serializers.DateTimeField(allow_null=True)
    connected = serializers.BooleanField()
    revoked = serializers.BooleanField()
    sm_state = serializers.CharField(help_text="its OpenSM's SMInfo state: MASTER, STANDBY, … (NO ANSWER)")
    sm_priority = serializers.IntegerField(allow_null=True)
    port_guid = serializers.CharField()
    config_hash = serializers.CharField(
        help_text="SHA-256 of the files its OpenSM runs, per-host lines left out: equal on every SM host of a fabric"
    )
    conf_priority = serializers.IntegerField(allow_null=True, help_text="the sm_priority its opensm.conf sets")
    master_since = serializers.DateTimeField(allow_null=True, help_text="when its OpenSM last took over as MASTER")
    in_step = serializers.BooleanField(
        help_text="its files and priority are the ones the console gives it (false: a push to it is pending)"
    )


class AgentCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64, help_text="the SM host's name")


class AgentCreatedSerializer(AgentSerializer):
    token = serializers.CharField(help_text="the agent's token: shown once (IBCONSOLE_AGENT_TOKEN)")
