"""Power policy API bodies: a pool's policy (durations in seconds), its runs, a node's pin."""

from __future__ import annotations

from rest_framework import serializers

from console.power.models import PolicyRun, PowerPin

DAY_S = 86_400


class PowerPinSerializer(serializers.ModelSerializer[PowerPin]):
    """A node pinned on: who pinned it, when (UTC) and why."""

    name = serializers.CharField(source="node.name", read_only=True)

    class Meta:
        model = PowerPin
        fields = ["node", "name", "pinned_by", "pinned_at", "reason"]
        read_only_fields = fields


class PowerPinInputSerializer(serializers.Serializer[dict]):
    """``PUT /api/nodes/<id>/power/pin/``."""

    reason = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")


class PowerPolicySerializer(serializers.Serializer[dict]):
    """A pool's power policy. On ``PUT`` every field is optional (absent: kept); ``pool``,
    ``enabled_at``, ``updated_*`` and ``pins`` are read-only."""

    pool = serializers.IntegerField(read_only=True)
    enabled = serializers.BooleanField(required=False, help_text="the minute task applies it (default: off)")
    dry_run = serializers.BooleanField(required=False, help_text="report what it would do, change nothing")
    idle_after_s = serializers.IntegerField(
        required=False, min_value=0, max_value=30 * DAY_S, help_text="idle this long before a node may be powered off"
    )
    buffer_nodes = serializers.IntegerField(
        required=False, min_value=0, max_value=100_000, help_text="idle nodes kept on (warm buffer)"
    )
    buffer_percent = serializers.FloatField(
        required=False, min_value=0.0, max_value=100.0, help_text="or this % of the pool, whichever is larger"
    )
    margin_s = serializers.IntegerField(
        required=False, min_value=0, max_value=DAY_S, help_text="slack on top of a node's boot time"
    )
    max_actions_per_minute = serializers.IntegerField(
        required=False, min_value=0, max_value=10_000, help_text="power actions per minute (0: no limit)"
    )
    enabled_at = serializers.DateTimeField(read_only=True, allow_null=True)
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True)
    updated_by = serializers.CharField(read_only=True)
    pins = PowerPinSerializer(many=True, read_only=True)


class PolicyActionSerializer(serializers.Serializer[dict]):
    node = serializers.CharField()
    node_id = serializers.IntegerField()
    action = serializers.ChoiceField(choices=["on", "off"])
    reason = serializers.CharField()
    outcome = serializers.ChoiceField(choices=["done", "would", "refused"])
    error = serializers.CharField(required=False)


class PolicyRunSerializer(serializers.ModelSerializer[PolicyRun]):
    """One run: when (UTC), dry run or not, and each action with its reason and outcome."""

    actions = PolicyActionSerializer(many=True)

    class Meta:
        model = PolicyRun
        fields = ["id", "pool", "at", "dry_run", "trigger", "actor", "summary", "actions"]
        read_only_fields = fields


class PolicyRunInputSerializer(serializers.Serializer[dict]):
    """``POST /api/pools/<id>/power-policy/run/``: ``dry_run`` absent: the stored setting."""

    dry_run = serializers.BooleanField(required=False, allow_null=True, default=None)
