"""Serializers of the designer API. Plan options mirror `manage.py design plan` flags."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from designer.models import CatalogueEntry, Design, DesignRevision


class PlanOptionsSerializer(serializers.Serializer):
    topology = serializers.ChoiceField(
        choices=["fat-tree", "rail-optimized", "torus", "dragonfly-plus"], required=False
    )
    gpus = serializers.IntegerField(required=False, allow_null=True)
    nodes = serializers.IntegerField(required=False, allow_null=True)
    node_type = serializers.CharField(required=False, max_length=60)
    gpus_per_node = serializers.IntegerField(required=False, allow_null=True)
    hcas_per_node = serializers.IntegerField(required=False, allow_null=True)
    switch = serializers.CharField(required=False, max_length=60)
    oversubscription = serializers.CharField(required=False, max_length=20)
    levels = serializers.CharField(required=False, max_length=4)
    manager_slot = serializers.BooleanField(required=False)
    dims = serializers.CharField(required=False, allow_null=True, max_length=40)
    hosts_per_switch = serializers.IntegerField(required=False, allow_null=True)
    su_nodes = serializers.IntegerField(required=False, allow_null=True)
    groups = serializers.IntegerField(required=False, allow_null=True)
    split = serializers.CharField(required=False, allow_null=True, max_length=30)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({key: ["unknown option"] for key in unknown})
        attrs = super().to_internal_value(data)
        return {k: v for k, v in attrs.items() if v is not None}


class IssueSerializer(serializers.Serializer):
    """One validation finding (``designer.errors.Issue``)."""

    severity = serializers.CharField(help_text="error or warning")
    code = serializers.CharField()
    element = serializers.CharField()
    message = serializers.CharField()


class PlanSummarySerializer(serializers.Serializer):
    """The plan summary (stable keys; more may be added)."""

    topology = serializers.CharField()
    nodes = serializers.IntegerField()
    gpus = serializers.IntegerField()
    endpoints = serializers.IntegerField()
    switches = serializers.DictField(child=serializers.IntegerField())
    cables = serializers.DictField(child=serializers.IntegerField())
    transceivers = serializers.IntegerField()
    oversubscription = serializers.CharField(allow_null=True)
    bisection_bandwidth_gbps = serializers.FloatField()
    diameter_switch_hops = serializers.IntegerField(allow_null=True)
    power_w = serializers.FloatField(help_text="the network's: switches, transceivers and active cables")
    cost = serializers.FloatField(help_text="the network's list price: switches, transceivers and cables")
    compute_power_w = serializers.FloatField(help_text="the nodes' (the catalogue's watts per node type)")
    compute_cost = serializers.FloatField(help_text="the nodes' list price")
    warnings = serializers.ListField(child=serializers.CharField())
    # The serializer metaclass pops declared fields, so this field does not shadow `Serializer.errors`.
    errors = serializers.ListField(child=serializers.CharField())  # type: ignore[assignment]
    issues = IssueSerializer(many=True)


class CompareSerializer(serializers.Serializer):
    options = serializers.ListField(child=PlanOptionsSerializer(), min_length=1, max_length=12)


class CompareResultSerializer(serializers.Serializer):
    rows = PlanSummarySerializer(many=True)


class GraphPayloadSerializer(serializers.Serializer):
    graph = serializers.JSONField()
    message = serializers.CharField(required=False, allow_blank=True, max_length=200)


class ValidationResultSerializer(serializers.Serializer):
    summary = PlanSummarySerializer()
    issues = IssueSerializer(many=True)


class CanISerializer(serializers.Serializer):
    switches = serializers.IntegerField()
    gpus = serializers.IntegerField(required=False, allow_null=True)
    nodes = serializers.IntegerField(required=False, allow_null=True)
    switch_model = serializers.CharField(required=False, max_length=60)
    node_type = serializers.CharField(required=False, max_length=60)
    gpus_per_node = serializers.IntegerField(required=False, allow_null=True)
    hcas_per_node = serializers.IntegerField(required=False, allow_null=True)
    oversubscription = serializers.CharField(required=False, max_length=20)


class ImportJobSerializer(serializers.Serializer):
    """A large import run by a worker (``CONSOLE_IMPORT_INLINE_BYTES``): follow ``url`` until
    ``state`` is ``done`` (``design`` is the design it made) or ``failed`` (``error``, ``field_errors``)."""

    id = serializers.IntegerField()
    name = serializers.CharField(help_text="the design it makes")
    state = serializers.ChoiceField(choices=["queued", "running", "done", "failed"])
    step = serializers.CharField(help_text="the phase it is in, in words")
    percent = serializers.IntegerField(help_text="0-100, by phase")
    size_bytes = serializers.IntegerField(help_text="the input's size (dump, node-name map, host types)")
    error = serializers.CharField()
    field_errors = serializers.DictField(help_text="the input field each error is about (a 400's `fields`)")
    design = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField()


class NodeTypesSerializer(serializers.Serializer):
    host_types = serializers.CharField(
        max_length=2_000_000,
        help_text="'PATTERN NODE_TYPE' lines (shell-style patterns on host names, catalogue node types; the first "
        "match wins) or 'host,node_type' CSV rows",
    )


class ImportSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    description = serializers.CharField(required=False, allow_blank=True)
    text = serializers.CharField(
        help_text="ibnetdiscover output (plain, -g grouped or -p ports report)", max_length=50_000_000
    )
    node_name_map = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=10_000_000,
        help_text='optional node-name map (rdma-core format: <guid> "<name>") naming the discovered GUIDs',
    )
    host_types = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100_000,
        help_text="optional 'PATTERN NODE_TYPE' lines (shell-style patterns on host names, catalogue node "
        "types): which hosts are which servers, so they come in with their GPUs",
    )


class RevisionBriefSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None)

    class Meta:
        model = DesignRevision
        fields = ["number", "message", "created_at", "created_by"]
        read_only_fields = fields


class RevisionSerializer(RevisionBriefSerializer):
    design: serializers.PrimaryKeyRelatedField[Design] = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta(RevisionBriefSerializer.Meta):
        fields = ["design", "number", "message", "created_at", "created_by", "summary"]
        read_only_fields = fields


class DesignSerializer(serializers.ModelSerializer):
    options = PlanOptionsSerializer(write_only=True)
    revisions = RevisionBriefSerializer(many=True, read_only=True)
    summary = serializers.SerializerMethodField()

    class Meta:
        model = Design
        fields = [
            "id",
            "name",
            "description",
            "topology",
            "options",
            "latest_revision",
            "created_at",
            "revisions",
            "summary",
        ]
        read_only_fields = ["id", "topology", "latest_revision", "created_at", "revisions"]

    def get_summary(self, design: Design) -> dict:
        latest = next((r for r in design.revisions.all() if r.number == design.latest_revision), None)
        return latest.summary if latest else {}


class DesignListSerializer(DesignSerializer):
    class Meta(DesignSerializer.Meta):
        fields = ["id", "name", "description", "topology", "latest_revision", "created_at"]
        read_only_fields = fields


class CatalogueEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = CatalogueEntry
        fields = ["id", "kind", "name", "data", "updated_at"]
        read_only_fields = ["id", "updated_at"]
