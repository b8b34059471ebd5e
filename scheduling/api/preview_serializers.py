"""Serializers of a reservation's preview: where a request would land (or why not, and what
would fit instead) and what it costs (``POST /api/reservations/preview/``)."""

from __future__ import annotations

from rest_framework import serializers


class PlacementSerializer(serializers.Serializer):
    nodes = serializers.ListField(child=serializers.CharField())
    gpu_indices = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()))
    leaf_groups = serializers.ListField(child=serializers.CharField())
    leaves = serializers.ListField(child=serializers.CharField())
    spines = serializers.ListField(child=serializers.CharField())
    rail_aligned = serializers.BooleanField()
    max_switch_hops = serializers.IntegerField()
    score = serializers.FloatField()
    sharp = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="SHARP reservations only: the switches of the aggregation tree, leaves first, root last",
    )
    sites = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="a pool at several sites: the sites it takes"
    )
    span = serializers.DictField(
        required=False, help_text="spanning sites: the split, the ring and the inter-site cost of a ring all-reduce"
    )


class RejectionSerializer(serializers.Serializer):
    reason = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()


class PreviewQuotaSerializer(serializers.Serializer):
    limit_gpus = serializers.IntegerField()
    guaranteed_gpus = serializers.IntegerField()
    held_gpus = serializers.IntegerField()


class OfferSerializer(serializers.Serializer):
    """An alternative to a refused request, placeable as offered."""

    kind = serializers.ChoiceField(
        ["smaller_now", "later", "queue"],
        help_text="smaller_now: the largest size that fits now; later: the full size at the earliest start "
        "it fits; queue: the full size with start asap",
    )
    gpus = serializers.IntegerField()
    nodes = serializers.IntegerField(
        allow_null=True,
        help_text="whole nodes when the request asked by nodes (offers are in the unit asked; taking one "
        "asks for these nodes); null when it asked by GPUs",
    )
    start = serializers.DateTimeField(allow_null=True, help_text="later only; null: now (or asap for queue)")

    def get_fields(self) -> dict[str, serializers.Field]:
        # ``label`` is also an attribute of every DRF field: declared here, not as a class attribute.
        fields = super().get_fields()
        fields["label"] = serializers.CharField(help_text='in words, e.g. "112 GPUs now" or "3 nodes (24 GPUs) now"')
        return fields


class PreviewSerializer(serializers.Serializer):
    """Where a request would land (or why not, and what would fit instead), what it costs."""

    placeable = serializers.BooleanField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    gpus = serializers.IntegerField()
    borrowed = serializers.BooleanField()
    quota = PreviewQuotaSerializer()
    placement = PlacementSerializer(allow_null=True)
    preempts = serializers.ListField(child=serializers.IntegerField())
    rejection = RejectionSerializer(allow_null=True)
    gpu_hours = serializers.DecimalField(max_digits=14, decimal_places=2, help_text="GPUs × hours of the window")
    cost = serializers.DecimalField(
        max_digits=16, decimal_places=2, help_text="gpu_hours at the pool's price of a GPU-hour for the class"
    )
    currency = serializers.CharField(help_text="ISO 4217 code of cost")
    offers = OfferSerializer(many=True, help_text="when not placeable: alternatives that are (may be empty)")
    site_choice = serializers.DictField(
        allow_null=True, help_text="a pool at several sites: the site chosen, the rule and why (null: one site)"
    )
