"""The fabric validation suite over REST (operators run it, auditors read it).

    POST /api/fabrics/{id}/validation/                queue a run: 202 with it (operators; joins the
                                                      one queued or running)
    GET  /api/fabrics/{id}/validation/                the latest runs, newest first (?limit=, ≤ 50)
    GET  /api/fabrics/{id}/validation/{run}/          one run: state, step, verdicts
    GET  /api/fabrics/{id}/validation/{run}/csv/      its report as CSV (one row per offender)

The suite runs on a worker through the fabric's agent, never in a web request
(:mod:`console.telemetry.validation`). Tenant roles get 403 on every verb.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.fabric.models import Fabric
from console.telemetry import validation
from console.telemetry.models import ValidationRun
from console.tenancy.api.base import PrincipalMixin
from console.tenancy.errors import Invalid
from console.tenancy.models import Role
from designer.imports.health import as_csv

READERS = frozenset({Role.OPERATOR, Role.AUDITOR})

VerdictsSerializer = inline_serializer(
    "ValidationVerdict",
    {
        "code": serializers.CharField(help_text="the test: guids, lids, link-rates, subnet-managers, routes, …"),
        "title": serializers.CharField(),
        "status": serializers.ChoiceField(choices=["pass", "fail", "skip"]),
        "count": serializers.IntegerField(help_text="offending objects found (all of them)"),
        "offenders": serializers.ListField(child=serializers.CharField(), help_text="the first 50, named"),
        "fix": serializers.CharField(help_text="what to do (empty when it passed)"),
        "why": serializers.CharField(required=False, help_text="why it was skipped"),
        "seconds": serializers.FloatField(help_text="how long the test took"),
    },
    many=True,
)
RunSerializer = inline_serializer(
    "ValidationRun",
    {
        "id": serializers.IntegerField(),
        "fabric": serializers.IntegerField(),
        "state": serializers.ChoiceField(choices=ValidationRun.State.choices),
        "step": serializers.CharField(help_text="what it is doing now, in words (empty once finished)"),
        "trigger": serializers.CharField(help_text="api, cli or schedule"),
        "error": serializers.CharField(help_text="why the run failed (empty unless failed)"),
        "ok": serializers.BooleanField(allow_null=True, help_text="no test failed (null until done)"),
        "failed": serializers.ListField(child=serializers.CharField(), help_text="the codes of the failed tests"),
        "verdicts": VerdictsSerializer,
        "discovery_id": serializers.IntegerField(allow_null=True),
        "created_at": serializers.DateTimeField(),
        "started_at": serializers.DateTimeField(allow_null=True),
        "finished_at": serializers.DateTimeField(allow_null=True),
        "duration_s": serializers.FloatField(allow_null=True),
        "url": serializers.CharField(help_text="this run, to poll"),
    },
)
LIMIT = OpenApiParameter("limit", int, description="how many runs (default 10, at most 50)", required=False)


def limit_of(request: Request, default: int, most: int) -> int:
    """``?limit=``: a number from 1 to ``most`` (``default`` when absent); 400 otherwise."""
    raw = request.query_params.get("limit", str(default))
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= most:
        raise Invalid(f"limit must be a number from 1 to {most}, not {raw!r}", fields={"limit": raw})
    return int(raw)


class FabricValidationView(PrincipalMixin, APIView):
    """The fabric's validation runs (GET), or a new one (POST)."""

    read_roles = READERS
    write_roles = frozenset({Role.OPERATOR})

    @extend_schema(parameters=[LIMIT], responses={200: serializers.ListSerializer(child=RunSerializer)})
    def get(self, request: Request, fabric_id: int) -> Response:
        fabric = get_object_or_404(Fabric, pk=fabric_id)
        rows = ValidationRun.objects.filter(fabric=fabric).order_by("-created_at", "-id")[: limit_of(request, 10, 50)]
        return Response([validation.run_json(row) for row in rows])

    @extend_schema(request=None, responses={202: RunSerializer})
    def post(self, request: Request, fabric_id: int) -> Response:
        """Queue the suite (audited): 202 with the run to poll, the one already queued or running
        if any."""
        fabric = get_object_or_404(Fabric, pk=fabric_id)
        row, _ = validation.start(fabric, actor=self.actor, trigger="api")
        return Response(validation.run_json(row), status=status.HTTP_202_ACCEPTED)


class FabricValidationRunView(PrincipalMixin, APIView):
    """One validation run: queued, running (with its step), done (with its verdicts) or failed."""

    read_roles = READERS

    @extend_schema(responses={200: RunSerializer})
    def get(self, request: Request, fabric_id: int, run_id: int) -> Response:
        row = get_object_or_404(ValidationRun, pk=run_id, fabric_id=fabric_id)
        return Response(validation.run_json(row))


class FabricValidationCsvView(PrincipalMixin, APIView):
    """One run's report as CSV: ``code,status,offender,fix``, one row per offender."""

    read_roles = READERS

    @extend_schema(responses={200: OpenApiResponse(description="text/csv")})
    def get(self, request: Request, fabric_id: int, run_id: int) -> HttpResponse:
        row = get_object_or_404(ValidationRun, pk=run_id, fabric_id=fabric_id)
        response = HttpResponse(as_csv(row.verdicts), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="validation-{row.fabric_id}-{row.pk}.csv"'
        return response
