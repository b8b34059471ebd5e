"""Discovery and design-vs-actual compare of a fabric over REST (operators run, auditors read).

    GET  /api/fabrics/{id}/discovery/              the latest discovery run (404 before the first one)
    POST /api/fabrics/{id}/discovery/              queue a sweep (discover + compare): 202 with the job
                                                   (operators; joins the one queued or running)
    GET  /api/fabrics/{id}/discovery/jobs/{job}/   a job: state, step, error, the run it stored
    GET  /api/fabrics/{id}/compare/                a current discovery compared with the bound design
                                                   revision (when the stored one is stale, a new one is
                                                   queued and waited for up to FABRIC_COMPARE_WAIT_S,
                                                   else 202 with its job; ?discover=false compares the
                                                   stored one as it is)

The sweep runs on a worker through the fabric's agent, never in a web request.

Fabrics belong to the operator, not to a tenant: tenant roles get 403 on every verb.
"""

from __future__ import annotations

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.fabric.discovery import freshness, jobs, services
from console.fabric.models import DiscoveryJob, DiscoveryRun, Fabric
from console.tenancy.api.base import PrincipalMixin
from console.tenancy.errors import Invalid, NotFound
from console.tenancy.models import Role

READERS = frozenset({Role.OPERATOR, Role.AUDITOR})


class DiscoveryRunSerializer(serializers.ModelSerializer):
    """One discovery run: when, how old, how long, counts, routing check and comparison."""

    age_s = serializers.SerializerMethodField(help_text="seconds since the discovery ran")

    class Meta:
        model = DiscoveryRun
        fields = ["id", "fabric", "created_at", "age_s", "duration_s", "summary", "routing", "compare"]

    def get_age_s(self, run: DiscoveryRun) -> float:
        return round(freshness.age_of(run), 3)


class DiscoveryRunDetailSerializer(DiscoveryRunSerializer):
    """A run with the discovered topology (nodes with GUIDs and LIDs, links with rates)."""

    class Meta(DiscoveryRunSerializer.Meta):
        fields = [*DiscoveryRunSerializer.Meta.fields, "topology"]


CompareSerializer = inline_serializer(
    "FabricCompare",
    {
        "fabric_id": serializers.IntegerField(),
        "discovery_id": serializers.IntegerField(),
        "discovered_at": serializers.DateTimeField(),
        "discovery_age_s": serializers.FloatField(help_text="seconds since the discovery ran"),
        "discovered_now": serializers.BooleanField(help_text="this request ran the discovery"),
        "freshness": inline_serializer(
            "FabricCompareFreshness",
            {
                "max_age_s": serializers.FloatField(help_text="FABRIC_COMPARE_MAX_AGE_S"),
                "sm_swept_since": serializers.BooleanField(
                    allow_null=True, help_text="OpenSM ended a heavy sweep since (null: cannot tell)"
                ),
                "stale": serializers.BooleanField(help_text="too old or swept since: the fabric may differ"),
                "note": serializers.CharField(help_text="why this discovery was used, in words"),
            },
        ),
        "missing": serializers.ListField(child=serializers.DictField()),
        "extra": serializers.ListField(child=serializers.DictField()),
        "miswired": serializers.ListField(child=serializers.DictField()),
        "mismatches": serializers.ListField(child=serializers.DictField()),
        "fixes": serializers.ListField(child=serializers.CharField()),
        "routing": serializers.DictField(),
        "speed_check": serializers.DictField(),
        "summary": serializers.DictField(),
        "ok": serializers.BooleanField(),
    },
)
JobSerializer = inline_serializer(
    "DiscoveryJob",
    {
        "id": serializers.IntegerField(),
        "fabric": serializers.IntegerField(),
        "state": serializers.ChoiceField(choices=DiscoveryJob.State.choices),
        "step": serializers.CharField(help_text="what it is doing now, in words (empty once finished)"),
        "error": serializers.CharField(help_text="why it failed (empty unless failed)"),
        "discovery_id": serializers.IntegerField(allow_null=True, help_text="the run it stored, once done"),
        "created_at": serializers.DateTimeField(),
        "started_at": serializers.DateTimeField(allow_null=True),
        "finished_at": serializers.DateTimeField(allow_null=True),
        "url": serializers.CharField(help_text="this job, to poll"),
    },
)
DISCOVER_PARAM = OpenApiParameter(
    "discover",
    bool,
    description="false: compare the stored discovery however old (default true: discover afresh when "
    "the stored one is older than FABRIC_COMPARE_MAX_AGE_S or OpenSM swept since)",
    required=False,
)
TOPOLOGY_PARAM = OpenApiParameter(
    "topology", bool, description="include the discovered topology (large)", required=False
)


def _fabric(fabric_id: int) -> Fabric:
    return get_object_or_404(Fabric.objects.select_related("revision__design"), pk=fabric_id)


class FabricDiscoveryView(PrincipalMixin, APIView):
    """The fabric's latest discovery (GET), or a new sweep with its comparison (POST)."""

    read_roles = READERS
    write_roles = frozenset({Role.OPERATOR})

    @extend_schema(parameters=[TOPOLOGY_PARAM], responses={200: DiscoveryRunDetailSerializer})
    def get(self, request: Request, fabric_id: int) -> Response:
        """The latest discovery run; 404 until one has run."""
        fabric = _fabric(fabric_id)
        run = services.latest_run(fabric)
        if run is None:
            raise NotFound(f"no discovery of {fabric.name} yet: POST here to run one")
        with_topology = request.query_params.get("topology") in ("1", "true", "yes")
        cls = DiscoveryRunDetailSerializer if with_topology else DiscoveryRunSerializer
        return Response(cls(run).data)

    @extend_schema(request=None, responses={202: JobSerializer})
    def post(self, request: Request, fabric_id: int) -> Response:
        """Queue a discovery (ibnetdiscover through the fabric's agent, stored and compared with
        the design; audited): 202 with the job to poll, the one already queued or running if any."""
        fabric = _fabric(fabric_id)
        job, _ = jobs.start(fabric, actor=self.actor)
        return Response(jobs.job_json(job), status=status.HTTP_202_ACCEPTED)


class FabricDiscoveryJobView(PrincipalMixin, APIView):
    """One discovery job of a fabric: queued, running (with its step), done (with its run) or
    failed (with the reason)."""

    read_roles = READERS

    @extend_schema(responses={200: JobSerializer})
    def get(self, request: Request, fabric_id: int, job_id: int) -> Response:
        job = get_object_or_404(DiscoveryJob, pk=job_id, fabric_id=fabric_id)
        return Response(jobs.job_json(job))


class FabricCompareView(PrincipalMixin, APIView):
    """Designed vs discovered for a current discovery: missing, extra and miswired cables,
    rate mismatches, the fix list and the routing check, with the discovery's time and age."""

    read_roles = READERS

    @extend_schema(
        parameters=[DISCOVER_PARAM],
        responses={
            200: CompareSerializer,
            202: OpenApiResponse(
                JobSerializer,
                description="A new discovery is needed and still running after FABRIC_COMPARE_WAIT_S: "
                "the job to poll, then GET this again",
            ),
            409: OpenApiResponse(
                description="A fresh discovery is needed and the fabric cannot be reached now "
                "(`lab_not_running`: its lab is stopped)"
            ),
        },
    )
    def get(self, request: Request, fabric_id: int) -> Response:
        """The comparison of the stored discovery when it is current, else of a new one (a read
        of the fabric, audited); ``?discover=false``: of the stored one, 404 until one has run."""
        fabric = _fabric(fabric_id)
        flag = request.query_params.get("discover", "true").lower()
        if flag not in ("true", "false", "1", "0", "yes", "no"):
            raise Invalid(f"discover must be true or false, not {flag!r}", fields={"discover": flag})
        refresh = flag in ("true", "1", "yes")
        fresh = jobs.through_job(fabric, actor=self.actor, wait_s=settings.FABRIC_COMPARE_WAIT_S)
        try:
            return Response(services.compare(fabric, refresh=refresh, actor=self.actor, fresh=fresh))
        except jobs.DiscoveryPending as pending:
            return Response(jobs.job_json(pending.job), status=status.HTTP_202_ACCEPTED)
