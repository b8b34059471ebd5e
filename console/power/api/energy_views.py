"""``GET /api/energy/``: kWh, always-on kWh and the fraction saved per pool, UTC day or node, as
JSON or CSV. Thin: ``console.power.energy`` computes. Operators and auditors read it; tenants
are refused (403): the energy of whole pools is the operator's data."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import renderers, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.power.energy import GROUP_BY, EnergyQuery, EnergyReport, energy
from console.tenancy.api.base import PrincipalMixin
from console.tenancy.api.renderers import ScopedBrowsableAPIRenderer
from console.tenancy.errors import Forbidden
from scheduling.api.usage_views import UsageCsvRenderer, UsageParams


class EnergyCsvRenderer(UsageCsvRenderer):
    """``?format=csv`` or ``Accept: text/csv``: one line per row (the total is the JSON's)."""

    columns = ("pool", "day", "node", "name", "fabric", "kwh", "kwh_always_on", "saved_fraction")


class EnergyParams(serializers.Serializer):
    """The query string: ISO datetimes or dates (a date is its UTC midnight)."""

    to = serializers.CharField(required=False)
    group_by = serializers.ChoiceField(choices=list(GROUP_BY), default="pool")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["from"] = serializers.CharField(required=False)  # a Python keyword

    def query(self) -> EnergyQuery:
        data = self.validated_data
        return EnergyQuery.checked(
            UsageParams.moment(data.get("from"), "from"), UsageParams.moment(data.get("to"), "to"), data["group_by"]
        )


class EnergyFiguresSerializer(serializers.Serializer):
    kwh = serializers.FloatField(help_text="energy drawn, from the catalogue's figures and the power history")
    kwh_always_on = serializers.FloatField(help_text="the same work with every node always on")
    saved_fraction = serializers.FloatField(help_text="1 − kwh / kwh_always_on (0 when nothing was drawn)")


class EnergyRowSerializer(EnergyFiguresSerializer):
    pool = serializers.IntegerField(required=False, allow_null=True, help_text="group_by=pool (null: no pool)")
    fabric = serializers.CharField(required=False, help_text="group_by=pool: the pool's fabric")
    day = serializers.DateField(required=False, help_text="group_by=day (UTC)")
    node = serializers.IntegerField(required=False, help_text="group_by=node")
    name = serializers.CharField(help_text="the group's readable name")


class EnergyReportSerializer(serializers.Serializer):
    window_from = serializers.DateTimeField()
    window_to = serializers.DateTimeField()
    counted_to = serializers.DateTimeField(help_text="the earlier of `window_to` and now: nothing later is counted")
    group_by = serializers.CharField()
    nodes = serializers.IntegerField(help_text="nodes counted")
    nodes_without_figures = serializers.IntegerField(help_text="nodes left out: their type has no catalogue watts")
    rows = EnergyRowSerializer(many=True)
    total = EnergyFiguresSerializer(help_text="every node once (a node in two pools is in both pool rows)")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        report: EnergyReport = instance
        return {
            "window_from": report.query.window_from.isoformat(),
            "window_to": report.query.window_to.isoformat(),
            "counted_to": report.counted_to.isoformat(),
            "group_by": report.query.group_by,
            "nodes": report.nodes,
            "nodes_without_figures": report.nodes_without_figures,
            "rows": report.rows,
            "total": report.total,
        }


class EnergyView(PrincipalMixin, APIView):
    """Energy accounting from the catalogue's idle/busy/off watts and the recorded power states
    and bookings (``docs/operations.md``, "Energy accounting"). Operators and auditors only."""

    renderer_classes = [renderers.JSONRenderer, ScopedBrowsableAPIRenderer, EnergyCsvRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("from", OpenApiTypes.STR, description="ISO date or datetime; default: `to` − 7 days"),
            OpenApiParameter("to", OpenApiTypes.STR, description="ISO date or datetime (exclusive); default: now"),
            OpenApiParameter("group_by", OpenApiTypes.STR, enum=list(GROUP_BY), description="default pool"),
            OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv"], description="or `Accept: text/csv`"),
        ],
        responses={
            200: OpenApiResponse(EnergyReportSerializer, description="JSON, or CSV (one line per row)"),
            403: OpenApiResponse(description="tenants: pool energy is the operator's data"),
        },
    )
    def get(self, request: Request) -> Response:
        if not self.principal.sees_all_tenants:
            raise Forbidden("only operators and auditors read the energy report")
        params = EnergyParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        report = energy(params.query())
        response = Response(EnergyReportSerializer(report).data)
        if getattr(request.accepted_renderer, "format", "") == "csv":
            stamp = report.query.window_from.strftime("%Y%m%d")
            response["Content-Disposition"] = f'attachment; filename="energy-{report.query.group_by}-{stamp}.csv"'
        return response
