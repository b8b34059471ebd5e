"""The health policy and its decisions over REST (operators set it, auditors read it).

    GET  /api/fabrics/{id}/health-policy/            the policy (``default``: none set, the default runs)
    PUT  /api/fabrics/{id}/health-policy/            replace it (operators; audited)
    POST /api/fabrics/{id}/health-policy/preview/    what a policy (the body; empty: the current one)
                                                     would have decided over the last hour of samples
    GET  /api/fabrics/{id}/port-decisions/           the policy's decisions, newest first (?limit=, ≤ 500)

Tenant roles get 403 on every verb (a decision names the fabric's ports and reservations).
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.fabric.models import Fabric
from console.telemetry import port_health
from console.telemetry.api.validation_views import limit_of
from console.telemetry.models import PortDecision
from console.tenancy.api.base import PrincipalMixin
from console.tenancy.models import Role

READERS = frozenset({Role.OPERATOR, Role.AUDITOR})

RuleSerializer = inline_serializer(
    "HealthRule",
    {
        "counter": serializers.CharField(
            help_text="SymbolErrorCounter, LinkErrorRecoveryCounter, LinkDownedCounter, "
            "PortRcvErrors, PortXmitDiscards; Temperature, BER (gauges)"
        ),
        "threshold": serializers.FloatField(help_text="a rise over the window (gauges: the value) above this crosses"),
        "window_s": serializers.FloatField(),
    },
    many=True,
)
PolicySerializer = inline_serializer(
    "HealthPolicy",
    {
        "rules": RuleSerializer,
        "dry_run": serializers.BooleanField(help_text="decide and record, change nothing"),
        "cap_min": serializers.IntegerField(),
        "cap_fraction": serializers.FloatField(help_text="at most max(cap_min, cap_fraction × ports) isolated"),
        "allow": serializers.ListField(child=serializers.CharField(), help_text="switch/port never isolated"),
        "clean_s": serializers.FloatField(help_text="an isolated port clean this long comes back"),
    },
)
PolicyAnswer = inline_serializer(
    "HealthPolicyAnswer", {"policy": PolicySerializer, "default": serializers.BooleanField()}
)
DecisionSerializer = inline_serializer(
    "PortDecision",
    {
        "id": serializers.IntegerField(allow_null=True),
        "fabric": serializers.IntegerField(),
        "switch": serializers.CharField(),
        "port": serializers.IntegerField(),
        "link": serializers.CharField(),
        "kind": serializers.ChoiceField(choices=PortDecision.Kind.choices),
        "dry_run": serializers.BooleanField(),
        "reasons": serializers.ListField(child=serializers.CharField()),
        "samples": serializers.ListField(child=serializers.DictField(), help_text="the readings that caused it"),
        "reservations": serializers.ListField(child=serializers.DictField(), help_text="[{id, tenant}]"),
        "change": serializers.IntegerField(allow_null=True),
        "error": serializers.CharField(),
        "at": serializers.DateTimeField(),
    },
)
PreviewAnswer = inline_serializer(
    "HealthPolicyPreview",
    {
        "policy": PolicySerializer,
        "since": serializers.DateTimeField(),
        "samples": serializers.IntegerField(),
        "ports": serializers.IntegerField(),
        "decisions": serializers.ListField(child=serializers.DictField()),
    },
)
LIMIT = OpenApiParameter("limit", int, description="how many (default 100, at most 500)", required=False)


class HealthPolicyView(PrincipalMixin, APIView):
    read_roles = READERS
    write_roles = frozenset({Role.OPERATOR})

    @extend_schema(responses={200: PolicyAnswer})
    def get(self, request: Request, fabric_id: int) -> Response:
        fabric = get_object_or_404(Fabric, pk=fabric_id)
        policy, default = port_health.policy_of(fabric.pk)
        return Response({"policy": policy.as_json(), "default": default})

    @extend_schema(request=PolicySerializer, responses={200: PolicyAnswer})
    def put(self, request: Request, fabric_id: int) -> Response:
        fabric = get_object_or_404(Fabric, pk=fabric_id)
        policy = port_health.set_policy(self.actor, self.principal, fabric, request.data)
        return Response({"policy": policy.as_json(), "default": False})


class HealthPolicyPreviewView(PrincipalMixin, APIView):
    read_roles = READERS
    write_roles = frozenset({Role.OPERATOR})

    @extend_schema(request=PolicySerializer, responses={200: PreviewAnswer})
    def post(self, request: Request, fabric_id: int) -> Response:
        fabric = get_object_or_404(Fabric, pk=fabric_id)
        document = request.data or port_health.policy_of(fabric.pk)[0].as_json()
        return Response(port_health.preview(fabric, document))


class PortDecisionsView(PrincipalMixin, APIView):
    read_roles = READERS

    @extend_schema(parameters=[LIMIT], responses={200: serializers.ListSerializer(child=DecisionSerializer)})
    def get(self, request: Request, fabric_id: int) -> Response:
        fabric = get_object_or_404(Fabric, pk=fabric_id)
        rows = PortDecision.objects.filter(fabric=fabric).order_by("-at", "-id")[: limit_of(request, 100, 500)]
        return Response([port_health.decision_json(row) for row in rows])
