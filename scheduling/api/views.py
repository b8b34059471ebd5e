"""Scheduling endpoints: pools (+ availability), quotas, reservations (create, preview, extend,
release, cancel, usage guide). Thin: every rule lives in ``scheduling.services``."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db.models import Count, Sum
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from console.fabric.filtersets import carrying_change
from console.tenancy.api.base import (
    GlobalResourceMixin,
    TenantScopedCreateReadViewSet,
    TenantScopedModelViewSet,
)
from console.tenancy.api.idempotency import idempotent
from console.tenancy.errors import Invalid
from console.tenancy.models import Role
from scheduling.api.guide_serializers import UsageGuideSerializer
from scheduling.api.preview_serializers import PreviewSerializer
from scheduling.api.serializers import (
    AvailabilitySerializer,
    ExtendSerializer,
    PoolPricesSerializer,
    PoolPricesUpdateSerializer,
    PoolSerializer,
    QuotaSerializer,
    ReservationRefusedSerializer,
    ReservationRequestSerializer,
    ReservationSerializer,
    minutes,
)
from scheduling.api.site_serializers import SITE_RELATED
from scheduling.filtersets import ReservationFilterSet
from scheduling.models import Pool, Quota, Reservation
from scheduling.services import inventory, lifecycle, pricing, queue, quotas, reservations, timeline
from scheduling.services.availability import availability
from scheduling.usage_guide import usage_guide

OPERATORS = frozenset({Role.OPERATOR})


class PoolViewSet(
    GlobalResourceMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """GPU pools of the managed fabrics. Everyone with a role reads (tenants reserve in them);
    operators create, delete, and change the default patience (``default_max_wait_minutes``)."""

    global_reason = "pools group the operator's nodes; tenants hold quotas in them, not pools"
    write_roles = OPERATORS
    # Counted in SQL (no query per pool); a GROUP BY ignores Meta.ordering, so it is restated.
    queryset = (
        Pool.objects.select_related("fabric")
        .annotate(annotated_node_count=Count("nodes", distinct=True), annotated_gpus=Sum("nodes__gpus"))
        .order_by("fabric", "name")  # Pool.Meta.ordering
    )
    serializer_class = PoolSerializer
    filterset_fields = ["fabric", "kind"]
    ordering_fields = ["name", "created_at"]

    def get_serializer_class(self) -> type[BaseSerializer]:
        # The browsable API renders the prices action's form from the view's serializer.
        return PoolPricesSerializer if self.action == "prices" else PoolSerializer

    def perform_create(self, serializer: BaseSerializer[Pool]) -> None:
        data = serializer.validated_data
        fabric = data["fabric"]
        nodes = inventory.select_nodes(
            fabric,
            data.get("kind", Pool.Kind.MANUAL),
            gpu_model=data.get("gpu_model", ""),
            sus=data.get("sus", ()),
            names=data.get("node_names", ()),
        )
        serializer.instance = inventory.create_pool(
            self.actor,
            self.principal,
            fabric=fabric,
            name=data["name"],
            kind=data.get("kind", Pool.Kind.MANUAL),
            nodes=nodes,
            description=data.get("description", ""),
            default_max_wait=_minutes(data.get("default_max_wait_minutes")),
        )

    def perform_update(self, serializer: BaseSerializer[Pool]) -> None:
        pool = serializer.instance
        assert pool is not None  # an update always has its object
        data = serializer.validated_data
        changed = {k for k, v in data.items() if k != "default_max_wait_minutes" and getattr(pool, k, None) != v}
        if changed:
            raise Invalid(
                "only default_max_wait_minutes can be changed", fields={k: ["read-only"] for k in sorted(changed)}
            )
        value = data.get("default_max_wait_minutes", minutes(pool.default_max_wait))
        serializer.instance = inventory.set_default_max_wait(self.actor, self.principal, pool, _minutes(value))

    def perform_destroy(self, instance: Pool) -> None:
        inventory.delete_pool(self.actor, self.principal, instance)

    @extend_schema(
        parameters=[
            OpenApiParameter("start", OpenApiTypes.DATETIME, description="default: now"),
            OpenApiParameter("hours", OpenApiTypes.NUMBER, description="default 24"),
            OpenApiParameter("step_minutes", OpenApiTypes.INT, description="default 60"),
        ],
        responses={200: AvailabilitySerializer},
    )
    @action(detail=True, methods=["get"])
    def availability(self, request: Request, pk: str | None = None) -> Response:
        """Free GPUs, free whole nodes and the largest free leaf group, slot by slot."""
        params = _AvailabilityParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        body = availability(
            self.get_object(),
            start=data.get("start"),
            hours=data["hours"],
            step=dt.timedelta(minutes=data["step_minutes"]),
        )
        return Response(AvailabilitySerializer(body).data)

    @extend_schema(methods=["GET"], request=None, responses={200: PoolPricesSerializer})
    @extend_schema(methods=["PUT"], request=PoolPricesUpdateSerializer, responses={200: PoolPricesSerializer})
    @action(detail=True, methods=["get", "put"])
    def prices(self, request: Request, pk: str | None = None) -> Response:
        """Price of a GPU-hour per priority class in this pool (chargeback): the pool's own or the
        default. Operators set one with a price, or clear it (back to the default) with null."""
        pool = self.get_object()
        if request.method == "PUT":
            body = PoolPricesUpdateSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            pool = pricing.set_prices(self.actor, self.principal, pool, body.validated_data["prices"])
        data = {"pool": pool.pk, "currency": settings.CONSOLE_CURRENCY, "prices": pricing.pool_prices(pool)}
        return Response(PoolPricesSerializer(data).data)


def _minutes(value: int | None) -> dt.timedelta | None:
    return None if value is None else dt.timedelta(minutes=value)


class _AvailabilityParams(serializers.Serializer):
    start = serializers.DateTimeField(required=False)
    hours = serializers.FloatField(min_value=0.1, max_value=24 * 90, default=24)
    step_minutes = serializers.IntegerField(min_value=1, max_value=24 * 60, default=60)


class QuotaViewSet(TenantScopedModelViewSet):
    """Tenants' quotas per pool with usage and headroom. Tenants read their own; operators
    write."""

    queryset = Quota.objects.select_related("pool", "tenant")
    serializer_class = QuotaSerializer
    write_roles = OPERATORS
    filterset_fields = ["tenant", "pool"]
    ordering_fields = ["pool", "tenant"]

    def perform_create(self, serializer: BaseSerializer[Quota]) -> None:
        data = serializer.validated_data
        serializer.instance = quotas.set_quota(
            self.actor,
            self.principal,
            tenant=self.tenant_for_create(serializer),
            pool=data["pool"],
            guaranteed_gpus=data["guaranteed_gpus"],
            borrow_limit_gpus=data.get("borrow_limit_gpus", 0),
            guaranteed_leaf_groups=data.get("guaranteed_leaf_groups"),
            classes=data.get("classes"),
            high_priority_gpus=data.get("high_priority_gpus"),
        )

    def perform_update(self, serializer: BaseSerializer[Quota]) -> None:
        quota = serializer.instance
        assert quota is not None  # an update always has its object
        data = serializer.validated_data
        if "pool" in data and data["pool"] != quota.pool:
            raise Invalid("a quota cannot move to another pool", fields={"pool": ["read-only"]})
        serializer.instance = quotas.set_quota(
            self.actor,
            self.principal,
            tenant=quota.tenant,
            pool=quota.pool,
            guaranteed_gpus=data.get("guaranteed_gpus", quota.guaranteed_gpus),
            borrow_limit_gpus=data.get("borrow_limit_gpus", quota.borrow_limit_gpus),
            guaranteed_leaf_groups=data.get("guaranteed_leaf_groups", quota.guaranteed_leaf_groups),
            classes=data.get("classes"),
            high_priority_gpus=data.get("high_priority_gpus", quota.high_priority_gpus),
        )

    def perform_destroy(self, instance: Quota) -> None:
        quotas.delete_quota(self.actor, self.principal, instance)


class ReservationViewSet(TenantScopedCreateReadViewSet):
    """Reservations of GPUs. Create answers 201 when placed, 409 with the stored rejection and
    its explanation when refused; ``preview`` shows where a request would land."""

    queryset = Reservation.objects.select_related("pool", *SITE_RELATED)
    serializer_class = ReservationSerializer
    filterset_class = ReservationFilterSet
    ordering_fields = ["created_at", "start", "end"]

    def get_serializer_class(self) -> type[BaseSerializer]:
        if self.action in {"create", "preview"}:
            return ReservationRequestSerializer
        return ReservationSerializer

    @extend_schema(
        request=ReservationRequestSerializer,
        responses={201: ReservationSerializer, 202: ReservationSerializer, 409: ReservationRefusedSerializer},
    )
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Reserve; placed → 201, queued (``start: "asap"`` that does not fit now) → 202 with
        ``estimated_start`` and ``queue_position``, rejected (capacity, constraints, quota) → 409
        with the reason."""
        serializer = ReservationRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        wanted = serializer.to_request()
        reserve = queue.reserve_asap if wanted.asap else reservations.reserve
        reservation = reserve(self.actor, self.principal, wanted)
        body = ReservationSerializer(reservation).data
        if reservation.status == Reservation.Status.REJECTED:
            refused: dict[str, Any] = {
                "code": reservation.explanation.get("reason") or "rejected",
                "detail": reservation.reason,
                "fields": {},
                "reservation": body,
            }
            return Response(refused, status=status.HTTP_409_CONFLICT)
        if reservation.status == Reservation.Status.QUEUED:
            return Response(body, status=status.HTTP_202_ACCEPTED)
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=ReservationRequestSerializer, responses={200: PreviewSerializer})
    @action(detail=False, methods=["post"], safe_post=True)
    def preview(self, request: Request) -> Response:
        """Where the request would land now (or why not, and the earliest window); reserves
        nothing."""
        serializer = ReservationRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        body = reservations.preview(self.principal, serializer.to_request())
        return Response(PreviewSerializer(body).data)

    @extend_schema(request=ExtendSerializer, responses={200: ReservationSerializer})
    @idempotent
    @action(detail=True, methods=["post"])
    def extend(self, request: Request, pk: str | None = None) -> Response:
        """Move the end later if the GPUs stay free and the quota allows."""
        reservation = self.get_object()
        serializer = ExtendSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        reservation = lifecycle.extend(self.actor, self.principal, reservation, serializer.validated_data["end"])
        return Response(ReservationSerializer(reservation).data)

    @extend_schema(request=None, responses={200: ReservationSerializer})
    @idempotent
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str | None = None) -> Response:
        """End early: GPUs free now, partition removed from the fabric."""
        reservation = lifecycle.release(self.actor, self.principal, self.get_object())
        return Response(ReservationSerializer(reservation).data)

    @extend_schema(request=None, responses={200: ReservationSerializer})
    @idempotent
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Withdraw a reservation that is not ready yet, or a queued request."""
        reservation = lifecycle.cancel(self.actor, self.principal, self.get_object())
        return Response(ReservationSerializer(reservation).data)

    @extend_schema(
        responses={
            200: inline_serializer(
                "ReservationTimeline",
                {
                    "id": serializers.IntegerField(),
                    "steps": serializers.ListField(
                        child=inline_serializer(
                            "ReservationStep",
                            {
                                "step": serializers.CharField(help_text="requested, queued, placed, pushed, …"),
                                "at": serializers.DateTimeField(),
                                "detail": serializers.CharField(help_text="why it waits or failed, where it says"),
                            },
                        )
                    ),
                },
            )
        }
    )
    @action(detail=True, methods=["get"])
    def timeline(self, request: Request, pk: str | None = None) -> Response:
        """Its history: requested → queued (why) → placed → pushed → verified → ready →
        released, each with its time (nobody's name)."""
        reservation = self.get_object()
        change = carrying_change(reservation.fabric_id, reservation.partition_name)
        steps = timeline.timeline(reservation, change)
        return Response({"id": reservation.pk, "steps": [s.as_dict() for s in steps]})

    @extend_schema(responses={200: UsageGuideSerializer})
    @action(detail=True, methods=["get"], url_path="usage-guide")
    def usage_guide(self, request: Request, pk: str | None = None) -> Response:
        """How to use it: hosts, Slurm hostlist, SSH targets, NCCL_IB_HCA/PKEY/SL, UCX_IB_SL."""
        guide = usage_guide(self.get_object())
        return Response(UsageGuideSerializer(guide).data)
