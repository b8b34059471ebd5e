"""Serializers of the scheduling API. Writes only validate shapes; services apply the rules."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django.db.models import Sum
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.fabric.models import Fabric
from console.tenancy.api.base import TenantField
from console.tenancy.models import Tenant
from scheduling.api.site_serializers import SiteRequestFields, SiteReservationFields
from scheduling.models import Pool, PriorityClass, Quota, Reservation
from scheduling.placement.registry import Param, params
from scheduling.services import power, quotas
from scheduling.services.reservations import MAX_SIZE, ReservationRequest
from scheduling.services.subnets import SubnetView, subnets_of

MAX_WAIT_MINUTES = 90 * 24 * 60


def minutes(value: dt.timedelta | None) -> int | None:
    """A duration as whole minutes, the API's duration unit (``duration_minutes``)."""
    return None if value is None else int(value.total_seconds() // 60)


class PoolSerializer(serializers.ModelSerializer):
    """A pool; on create, its nodes are chosen by ``kind`` (GPU model, SUs or node names)."""

    fabric = serializers.PrimaryKeyRelatedField(queryset=Fabric.objects.all())
    node_count = serializers.SerializerMethodField()
    gpus = serializers.SerializerMethodField()
    gpu_model = serializers.CharField(write_only=True, required=False, allow_blank=True)
    sus = serializers.ListField(child=serializers.IntegerField(min_value=0), write_only=True, required=False)
    node_names = serializers.ListField(
        child=serializers.CharField(max_length=165),
        write_only=True,
        required=False,
        help_text="manual pools: node names, or FABRIC/NODE for a node of another fabric (or one whose name "
        "several fabrics use)",
    )
    default_max_wait_minutes = serializers.IntegerField(
        min_value=0,
        max_value=MAX_WAIT_MINUTES,
        required=False,
        allow_null=True,
        help_text="patience of queued requests that give no max_wait_minutes (null: none)",
    )

    class Meta:
        model = Pool
        fields = [
            "id",
            "fabric",
            "name",
            "kind",
            "description",
            "node_count",
            "gpus",
            "gpu_model",
            "sus",
            "node_names",
            "default_max_wait_minutes",
            "created_at",
        ]
        read_only_fields = ["created_at"]

    def to_representation(self, instance: Pool) -> dict[str, Any]:
        body = super().to_representation(instance)
        body["default_max_wait_minutes"] = minutes(instance.default_max_wait)
        return body

    def get_node_count(self, pool: Pool) -> int:
        counted = getattr(pool, "annotated_node_count", None)  # PoolViewSet's queryset counts in SQL
        return counted if counted is not None else pool.nodes.count()

    def get_gpus(self, pool: Pool) -> int:
        if hasattr(pool, "annotated_gpus"):
            return pool.annotated_gpus or 0
        return pool.nodes.aggregate(total=Sum("gpus"))["total"] or 0


class AvailabilitySlotSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    free_gpus = serializers.IntegerField()
    free_nodes = serializers.IntegerField()
    largest_free_leaf_group_nodes = serializers.IntegerField()


class AvailabilitySerializer(serializers.Serializer):
    pool = serializers.IntegerField()
    total_gpus = serializers.IntegerField()
    total_nodes = serializers.IntegerField()
    leaf_groups = serializers.IntegerField()
    slots = AvailabilitySlotSerializer(many=True)


class QuotaUsageSerializer(serializers.Serializer):
    guaranteed_gpus = serializers.IntegerField()
    borrow_limit_gpus = serializers.IntegerField()
    limit_gpus = serializers.IntegerField()
    used_gpus = serializers.IntegerField()
    borrowed_gpus = serializers.IntegerField()
    peak_future_gpus = serializers.IntegerField()
    headroom_gpus = serializers.IntegerField()
    queued_gpus = serializers.IntegerField(help_text="GPUs of queued requests: apart from used and headroom")


class QuotaListSerializer(serializers.ListSerializer):
    """A page of quotas: their usages come from one query, not three per quota."""

    def to_representation(self, data: Any) -> list[Any]:
        rows = list(data.all() if hasattr(data, "all") else data)
        self.context["quota_usages"] = quotas.quota_usages(rows)
        return super().to_representation(rows)


class QuotaSerializer(serializers.ModelSerializer):
    """A tenant's quota in a pool with its usage and headroom now."""

    tenant = TenantField()
    usage = serializers.SerializerMethodField()
    guaranteed_gpus = serializers.IntegerField(min_value=0, max_value=MAX_SIZE)
    borrow_limit_gpus = serializers.IntegerField(min_value=0, max_value=MAX_SIZE, default=0)
    guaranteed_leaf_groups = serializers.IntegerField(min_value=1, max_value=10_000, required=False, allow_null=True)
    classes = serializers.ListField(
        child=serializers.ChoiceField(choices=PriorityClass.values),
        min_length=1,
        required=False,
        help_text="the priority classes the tenant may book (a new quota: training and best-effort)",
    )
    high_priority_gpus = serializers.IntegerField(
        min_value=0,
        max_value=MAX_SIZE,
        required=False,
        allow_null=True,
        help_text="most GPUs held at once in inference (null: up to the limit)",
    )

    class Meta:
        model = Quota
        fields = [
            "id",
            "tenant",
            "pool",
            "guaranteed_gpus",
            "borrow_limit_gpus",
            "guaranteed_leaf_groups",
            "classes",
            "high_priority_gpus",
            "usage",
            "updated_at",
        ]
        read_only_fields = ["updated_at"]
        list_serializer_class = QuotaListSerializer

    @extend_schema_field(QuotaUsageSerializer)
    def get_usage(self, quota: Quota) -> dict:
        batched = self.context.get("quota_usages") or {}
        return batched[quota.pk] if quota.pk in batched else quotas.quota_usage(quota)


class ReservationListSerializer(serializers.ListSerializer):
    """A page of reservations: their power/fabric steps come from two queries, not two each."""

    def to_representation(self, data: Any) -> list[Any]:
        rows = list(data.all() if hasattr(data, "all") else data)
        self.context["reservation_progress"] = power.progress(rows)
        self.context["reservation_subnets"] = subnets_of(r.pk for r in rows)
        return super().to_representation(rows)


class ReservationProgressSerializer(serializers.Serializer):
    """Where a granted reservation is on its way to ready."""

    step = serializers.ChoiceField(["powering-on", "power-failed", "off-until-start", "fabric"])
    message = serializers.CharField()
    nodes_total = serializers.IntegerField()
    nodes_waiting = serializers.IntegerField(help_text="nodes not powered on yet")
    expected_ready = serializers.DateTimeField(allow_null=True)


class ReservationSubnetSerializer(serializers.Serializer):
    """The reservation's P_Key on one subnet (fabric) it touches: its own fabric first. The P_Keys
    differ between subnets only when no value was free in every fabric's range (then
    ``NCCL_IB_PKEY`` differs per site)."""

    fabric = serializers.CharField()
    site = serializers.CharField(allow_null=True, help_text="slug of the fabric's site; null: a fabric without a site")
    pkey = serializers.CharField(help_text='"0x8123", as pkey_hex')
    live = serializers.BooleanField(help_text="the P_Key may be on this fabric's wire (not verified gone yet)")


class ReservationSerializer(SiteReservationFields, serializers.ModelSerializer):
    """A reservation as its tenant sees it, with its partition once placed (on every subnet it
    touches: ``subnets``), and its sites."""

    tenant: serializers.PrimaryKeyRelatedField[Tenant] = serializers.PrimaryKeyRelatedField(read_only=True)
    pkey_hex = serializers.SerializerMethodField()
    partition = serializers.CharField(source="partition_name", read_only=True)
    max_wait_minutes = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    subnets = serializers.SerializerMethodField()

    class Meta:
        model = Reservation
        fields = [
            "id",
            "tenant",
            "pool",
            "name",
            "created_by",
            "status",
            "priority_class",
            "requested_gpus",
            "requested_nodes",
            "gpu_model",
            "same_leaf",
            "max_switch_hops",
            "rail_aligned",
            "near",
            "span_sites",
            "site",
            "sites",
            "start",
            "end",
            "gpus",
            "borrowed",
            "pkey",
            "pkey_hex",
            "partition",
            "sl",
            "placement",
            "reason",
            "explanation",
            "fabric_error",
            "created_at",
            "ready_at",
            "ended_at",
            "queued_at",
            "estimated_start",
            "queue_position",
            "max_wait_minutes",
            "progress",
            "subnets",
        ]
        read_only_fields = fields
        list_serializer_class = ReservationListSerializer

    @extend_schema_field(ReservationSubnetSerializer(many=True))
    def get_subnets(self, reservation: Reservation) -> list[SubnetView]:
        batched = self.context.get("reservation_subnets") or {}
        if reservation.pk in batched:
            return list(batched[reservation.pk])
        return subnets_of([reservation.pk])[reservation.pk]

    @extend_schema_field(ReservationProgressSerializer(allow_null=True))
    def get_progress(self, reservation: Reservation) -> dict[str, Any] | None:
        batched = self.context.get("reservation_progress") or {}
        if reservation.pk in batched:
            return batched[reservation.pk]
        return power.progress([reservation])[reservation.pk]

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_max_wait_minutes(self, reservation: Reservation) -> int | None:
        return minutes(reservation.max_wait)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_pkey_hex(self, reservation: Reservation) -> str | None:
        return f"0x{reservation.pkey:04x}" if reservation.pkey is not None else None


def constraint_field(param: Param) -> serializers.Field:
    """The serializer field of a registered constraint parameter."""
    if param.kind is bool:
        return serializers.BooleanField(default=bool(param.default), help_text=param.help)
    # DRF takes None for "no bound"/"no limit"; its stubs only admit ints, hence the Any dicts.
    if param.kind is int:
        bounds: dict[str, Any] = {"min_value": param.min_value, "max_value": param.max_value}
        if param.nullable:
            return serializers.IntegerField(
                **bounds,
                required=False,
                allow_null=True,
                help_text=param.help,
            )
        return serializers.IntegerField(**bounds, default=param.default, help_text=param.help)
    limit: dict[str, Any] = {"max_length": param.max_length}
    return serializers.CharField(
        **limit, required=False, allow_blank=True, default=param.default or "", help_text=param.help
    )


ASAP = "asap"


@extend_schema_field({"oneOf": [{"type": "string", "format": "date-time"}, {"type": "string", "enum": [ASAP]}]})
class StartField(serializers.DateTimeField):
    """A start time, or ``"asap"``."""

    def to_internal_value(self, value: Any) -> Any:
        if value == ASAP:
            return ASAP
        return super().to_internal_value(value)


class ReservationRequestSerializer(SiteRequestFields, serializers.Serializer):
    """A reservation request: size (gpus or nodes), window, constraints and sites."""

    # The constraint fields are those of the registered constraint types
    # (scheduling.placement.registry), placed between priority_class and name.

    tenant = TenantField(help_text="operators only; tenant users always reserve for themselves")
    pool = serializers.PrimaryKeyRelatedField(queryset=Pool.objects.all())
    gpus = serializers.IntegerField(min_value=1, max_value=MAX_SIZE, required=False)
    nodes = serializers.IntegerField(min_value=1, max_value=MAX_SIZE, required=False)
    start = StartField(
        required=False,
        allow_null=True,
        help_text='default: now; "asap": placed now if it fits, else queued (needs duration_minutes)',
    )
    end = serializers.DateTimeField(required=False, allow_null=True)
    duration_minutes = serializers.IntegerField(min_value=1, max_value=90 * 24 * 60, required=False)
    max_wait_minutes = serializers.IntegerField(
        min_value=0,
        max_value=MAX_WAIT_MINUTES,
        required=False,
        allow_null=True,
        help_text="asap only: minutes to wait for a packed placement before a wider one (default: the pool's)",
    )
    priority_class = serializers.ChoiceField(PriorityClass.choices, default=PriorityClass.TRAINING)
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")

    def get_fields(self) -> dict[str, serializers.Field]:
        declared = super().get_fields()
        fields: dict[str, serializers.Field] = {}
        for key, value in declared.items():
            if key == "name":
                fields.update((p.name, constraint_field(p)) for p in params())
            fields[key] = value
        return fields

    def validate(self, attrs: dict) -> dict:
        if ("gpus" in attrs) == ("nodes" in attrs):
            raise serializers.ValidationError({"gpus": ["give exactly one of gpus or nodes"]})
        if attrs.get("end") is None and "duration_minutes" not in attrs:
            raise serializers.ValidationError({"end": ["give end or duration_minutes"]})
        if attrs.get("end") is not None and "duration_minutes" in attrs:
            raise serializers.ValidationError({"end": ["give end or duration_minutes, not both"]})
        start, end = attrs.get("start"), attrs.get("end")
        if start == ASAP:
            if end is not None:
                raise serializers.ValidationError({"start": ["asap takes duration_minutes, not end"]})
        elif attrs.get("max_wait_minutes") is not None:
            raise serializers.ValidationError({"max_wait_minutes": ["only with start asap"]})
        elif start is not None and end is not None and end <= start:
            raise serializers.ValidationError({"end": ["must be after start"]})
        return attrs

    def to_request(self) -> ReservationRequest:
        data = self.validated_data
        minutes = data.get("duration_minutes")
        tenant = data.get("tenant")
        asap = data.get("start") == ASAP
        wait = data.get("max_wait_minutes")
        return ReservationRequest(
            pool_id=data["pool"].pk,
            gpus=data.get("gpus"),
            nodes=data.get("nodes"),
            start=None if asap else data.get("start"),
            asap=asap,
            max_wait=dt.timedelta(minutes=wait) if wait is not None else None,
            end=data.get("end"),
            duration=dt.timedelta(minutes=minutes) if minutes else None,
            priority_class=data["priority_class"],
            constraints={p.name: data.get(p.name, p.default) for p in params()},
            name=data["name"],
            tenant_id=tenant.pk if tenant is not None else None,
            near=data["near"],
            span_sites=data["span_sites"],
        )


class ExtendSerializer(serializers.Serializer):
    end = serializers.DateTimeField()


class ReservationRefusedSerializer(serializers.Serializer):
    code = serializers.CharField()
    detail = serializers.CharField()
    # The serializer metaclass pops declared fields, so this field does not shadow `Serializer.fields`.
    fields = serializers.DictField()  # type: ignore[assignment]
    reservation = ReservationSerializer()


class PoolPriceSerializer(serializers.Serializer):
    priority_class = serializers.ChoiceField(choices=PriorityClass.choices)
    price = serializers.DecimalField(max_digits=10, decimal_places=4, help_text="per GPU-hour, in `currency`")
    default = serializers.DecimalField(max_digits=10, decimal_places=4, help_text="the setting's price")
    overridden = serializers.BooleanField(help_text="the pool sets its own price for the class")


class PoolPricesSerializer(serializers.Serializer):
    """A pool's GPU-hour prices, one per priority class."""

    pool = serializers.IntegerField()
    currency = serializers.CharField()
    prices = PoolPriceSerializer(many=True)


class PoolPricesUpdateSerializer(serializers.Serializer):
    """``{"prices": {"training": "3.10", "inference": null}}``: set, or clear (null: the default)."""

    prices = serializers.DictField(
        child=serializers.DecimalField(max_digits=10, decimal_places=4, min_value=Decimal(0), allow_null=True),
        allow_empty=False,
    )
