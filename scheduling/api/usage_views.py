"""``GET /api/usage/``: GPU-hours, borrowed GPU-hours, cost and preemptions per tenant, pool,
reservation, UTC day or site, as JSON or CSV. Thin: ``scheduling.services.usage`` computes, scoped
to the caller (a tenant reads only itself)."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Mapping
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import renderers, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.tenancy.api.base import PrincipalMixin
from console.tenancy.api.renderers import ScopedBrowsableAPIRenderer
from designer.exports.csvcells import SafeDictWriter, SafeWriter
from scheduling.services.usage import UsageQuery, usage_report
from scheduling.usage import GroupBy

#: CSV columns, in order; a row lacks the group keys of other groupings (left empty).
CSV_COLUMNS = (
    "tenant",
    "pool",
    "reservation",
    "day",
    "site",
    "name",
    "tenant_name",
    "pool_name",
    "priority_class",
    "gpus",
    "status",
    "gpu_hours",
    "borrowed_gpu_hours",
    "cost",
    "currency",
    "preemptions",
    "reservations",
    "guaranteed_utilisation",
)


class UsageCsvRenderer(renderers.BaseRenderer):
    """``?format=csv`` or ``Accept: text/csv``: the report's rows, one line each (an error: its
    detail on one line)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"
    #: the columns a row may have, in order (those no row nor the total has are left out)
    columns: tuple[str, ...] = CSV_COLUMNS

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None
    ) -> bytes:
        out = io.StringIO()
        if isinstance(data, dict) and "rows" in data:
            columns = [c for c in self.columns if any(c in row for row in data["rows"]) or c in data["total"]]
            writer = SafeDictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
            writer.writeheader()
            writer.writerows(data["rows"])
        else:
            writer2 = SafeWriter(out, lineterminator="\n")
            writer2.writerow(["error"])
            writer2.writerow([data.get("detail", data) if isinstance(data, dict) else data])
        return out.getvalue().encode()


class UsageParams(serializers.Serializer):
    """The query string: ISO datetimes or dates (a date is its UTC midnight)."""

    to = serializers.CharField(required=False)
    group_by = serializers.ChoiceField(choices=[g.value for g in GroupBy], default=GroupBy.TENANT.value)
    tenant = serializers.IntegerField(required=False, min_value=1, max_value=2**31 - 1)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # "from" is a Python keyword: it cannot be declared as a class attribute.
        self.fields["from"] = serializers.CharField(required=False)

    @staticmethod
    def moment(value: str | None, name: str) -> dt.datetime | None:
        if not value:
            return None
        try:
            parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise serializers.ValidationError(
                {name: ["an ISO 8601 date (2026-11-01) or datetime (2026-11-01T12:00:00Z)"]}
            ) from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)

    def query(self) -> UsageQuery:
        data = self.validated_data
        return UsageQuery.checked(
            self.moment(data.get("from"), "from"),
            self.moment(data.get("to"), "to"),
            GroupBy(data["group_by"]),
            data.get("tenant"),
        )


class UsageFiguresSerializer(serializers.Serializer):
    gpu_hours = serializers.FloatField()
    borrowed_gpu_hours = serializers.FloatField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=2, help_text="in `currency`")
    currency = serializers.CharField()
    preemptions = serializers.IntegerField(help_text="reservations preempted (ended) in the window")
    reservations = serializers.IntegerField(help_text="reservations that held GPUs in the group")
    guaranteed_utilisation = serializers.FloatField(
        allow_null=True, help_text="non-borrowed GPU-hours / guaranteed GPU-hours (tenant and pool groups)"
    )


class UsageRowSerializer(UsageFiguresSerializer):
    tenant = serializers.IntegerField(required=False, help_text="group_by=tenant, reservation")
    pool = serializers.IntegerField(required=False, help_text="group_by=pool, reservation")
    reservation = serializers.IntegerField(required=False, help_text="group_by=reservation")
    day = serializers.DateField(required=False, help_text="group_by=day (UTC)")
    site = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="group_by=site: the site's slug (a reservation's site is its fabric's); null for a fabric "
        "without a site, a site of its own (then `name` names the fabric)",
    )
    name = serializers.CharField(help_text="the group's readable name")
    tenant_name = serializers.CharField(required=False)
    pool_name = serializers.CharField(required=False)
    priority_class = serializers.CharField(required=False)
    gpus = serializers.IntegerField(required=False)
    status = serializers.CharField(required=False)


class UsageReportSerializer(serializers.Serializer):
    window_from = serializers.DateTimeField(source="query.window_from")
    window_to = serializers.DateTimeField(source="query.window_to")
    group_by = serializers.CharField(source="query.group_by")
    currency = serializers.CharField()
    rows = UsageRowSerializer(many=True)
    total = UsageFiguresSerializer()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        # The rows are already plain data (the service's dicts): no per-field round trip.
        return {
            "window_from": instance.query.window_from.isoformat(),
            "window_to": instance.query.window_to.isoformat(),
            "group_by": instance.query.group_by.value,
            "currency": instance.currency,
            "rows": instance.rows,
            "total": instance.total,
        }


class UsageView(PrincipalMixin, APIView):
    """Usage and chargeback. Operators and auditors read every tenant (``tenant`` narrows to
    one); a tenant reads only itself (``tenant`` is ignored). GPU-hours count from a
    reservation's start to the earliest of its end, ``ended_at`` and now, clipped to the window;
    queued, rejected and cancelled requests never count."""

    renderer_classes = [renderers.JSONRenderer, ScopedBrowsableAPIRenderer, UsageCsvRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("from", OpenApiTypes.STR, description="ISO date or datetime; default: `to` − 30 days"),
            OpenApiParameter("to", OpenApiTypes.STR, description="ISO date or datetime (exclusive); default: now"),
            OpenApiParameter(
                "group_by", OpenApiTypes.STR, enum=[g.value for g in GroupBy], description="default tenant"
            ),
            OpenApiParameter("tenant", OpenApiTypes.INT, description="operators and auditors: one tenant only"),
            OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv"], description="or `Accept: text/csv`"),
        ],
        responses={200: OpenApiResponse(UsageReportSerializer, description="JSON, or CSV (one line per row)")},
    )
    def get(self, request: Request) -> Response:
        params = UsageParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        report = usage_report(self.principal, params.query())
        response = Response(UsageReportSerializer(report).data)
        if getattr(request.accepted_renderer, "format", "") == "csv":
            stamp = report.query.window_from.strftime("%Y%m%d")
            response["Content-Disposition"] = f'attachment; filename="usage-{report.query.group_by}-{stamp}.csv"'
        return response
