"""Designer endpoints: plan (preview), compare, validate, can-i, import, designs, revisions,
canvas, diff and exports. Operators write; operators and auditors read."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.db.models import Prefetch
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.throttling import BaseThrottle

from console.tenancy.api.base import GlobalResourceMixin
from console.tenancy.errors import Invalid
from console.tenancy.models import Role
from console.tenancy.throttling import PlanRateThrottle
from designer import import_jobs, services
from designer.api.serializers import (
    CanISerializer,
    CatalogueEntrySerializer,
    CompareResultSerializer,
    CompareSerializer,
    DesignListSerializer,
    DesignSerializer,
    GraphPayloadSerializer,
    ImportJobSerializer,
    ImportSerializer,
    NodeTypesSerializer,
    PlanOptionsSerializer,
    PlanSummarySerializer,
    RevisionBriefSerializer,
    RevisionSerializer,
    ValidationResultSerializer,
)
from designer.errors import UnknownItemError
from designer.exports import FORMATS, export
from designer.feasibility import can_i
from designer.models import CatalogueEntry, Design, DesignRevision
from designer.options import REQUEST_BUDGET

READERS = frozenset({Role.OPERATOR, Role.AUDITOR})
REVISION = r"revisions/(?P<number>[0-9]+)"


#: actions that plan or validate a fabric (seconds of CPU each): counted per account
PLAN_ACTIONS = frozenset({"plan", "compare", "validate", "create", "can_i"})


class DesignViewSet(
    GlobalResourceMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Fabric designs and their immutable revisions."""

    #: The setting naming this request's body limit (console.tenancy.api.parsers); the import sets it.
    body_limit_setting: str | None = None

    global_reason = "designs describe the operator's fabric, which no tenant owns"
    read_roles = READERS
    queryset = Design.objects.prefetch_related(
        Prefetch("revisions", queryset=DesignRevision.objects.defer("graph").select_related("created_by"))
    )
    filterset_fields = ["topology"]
    ordering_fields = ["name", "created_at"]

    def get_serializer_class(self) -> type[BaseSerializer]:
        return DesignListSerializer if self.action == "list" else DesignSerializer

    def get_throttles(self) -> list[BaseThrottle]:
        """The account's design computations are counted too (``CONSOLE_THROTTLE_PLAN``)."""
        throttles = super().get_throttles()
        computes = self.action in PLAN_ACTIONS or (self.action == "revisions" and self.request.method == "POST")
        return [*throttles, PlanRateThrottle()] if computes else throttles

    # --- previews (nothing saved) ---------------------------------------------------------
    @extend_schema(request=PlanOptionsSerializer, responses={200: PlanSummarySerializer})
    @action(detail=False, methods=["post"], safe_post=True)
    def plan(self, request: Request) -> Response:
        """Plan a fabric from parameters and return its summary; saves nothing.
        Impossible input answers 400 with the errors (and the summary) in the body."""
        options = _options(request.data)
        summary = services.preview(options, budget=REQUEST_BUDGET).summary()
        if summary["errors"]:
            body = {
                "code": "invalid",
                "detail": summary["errors"][0],
                "fields": {"options": summary["errors"]},
                "summary": summary,
            }
            return Response(body, status=status.HTTP_400_BAD_REQUEST)
        return Response(summary)

    @extend_schema(request=CompareSerializer, responses={200: CompareResultSerializer})
    @action(detail=False, methods=["post"], safe_post=True)
    def compare(self, request: Request) -> Response:
        """Side-by-side summaries of several parameter sets (within one request's plan budget,
        all rows together)."""
        serializer = CompareSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        rows, left = [], REQUEST_BUDGET.endpoints  # the request's budget, shared by its rows
        for opts in serializer.validated_data["options"]:
            result = services.preview(opts, budget=replace(REQUEST_BUDGET, endpoints=left))
            rows.append(result.summary())
            if result.graph is not None:
                left -= sum(len(n.port_guids) or 1 for n in result.graph.nodes.values())
        return Response({"rows": rows})

    @extend_schema(request=GraphPayloadSerializer, responses={200: ValidationResultSerializer})
    @action(detail=False, methods=["post"], safe_post=True)
    def validate(self, request: Request) -> Response:
        """Re-validate and re-measure an edited graph; saves nothing."""
        serializer = GraphPayloadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        graph = services.graph_from_payload(serializer.validated_data["graph"], budget=REQUEST_BUDGET)
        return Response(services.validate_graph(graph))

    @extend_schema(request=CanISerializer, responses={200: OpenApiTypes.OBJECT})
    @action(detail=False, methods=["post"], url_path="can-i", safe_post=True)
    def can_i(self, request: Request) -> Response:
        """ "Can I do X with Y?" answered with the arithmetic."""
        serializer = CanISerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        args = {k: v for k, v in serializer.validated_data.items() if v is not None}
        answer = can_i(catalogue=services.load_catalogue(), **args)
        return Response(answer.as_dict())

    # --- designs --------------------------------------------------------------------------
    @extend_schema(request=DesignSerializer, responses={201: DesignSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Plan from options and save the design with its first revision."""
        serializer = DesignSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        design, _ = services.create_design(
            self.actor,
            self.principal,
            name=data["name"],
            options=data["options"],
            description=data.get("description", ""),
            budget=REQUEST_BUDGET,
        )
        return Response(DesignSerializer(self.queryset.get(pk=design.pk)).data, status=201)

    def perform_destroy(self, instance: Design) -> None:
        services.delete_design(self.actor, self.principal, instance)

    @extend_schema(
        request=ImportSerializer,
        responses={
            201: DesignSerializer,
            202: OpenApiResponse(
                ImportJobSerializer,
                description="The input is larger than CONSOLE_IMPORT_INLINE_BYTES: a worker imports it; "
                "follow the job (Location) until it is done or failed",
            ),
        },
    )
    # A real fabric's dump is megabytes (about 1 MB per 2,000 HCAs): its own, larger body limit.
    @action(detail=False, methods=["post"], url_path="import", body_limit_setting="CONSOLE_MAX_IMPORT_BYTES")
    def import_ibnetdiscover(self, request: Request) -> Response:
        """A brownfield fabric: ibnetdiscover output becomes a design with one revision, at once
        (201) or, for a large input, by a worker (202 with the job to follow)."""
        serializer = ImportSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if import_jobs.needs_job(data["text"], data.get("node_name_map"), data.get("host_types")):
            job = import_jobs.start(self.actor, self.principal, **data)
            headers = {"Location": import_jobs.url_of(job)}
            return Response(import_jobs.job_json(job), status=status.HTTP_202_ACCEPTED, headers=headers)
        design, _ = services.import_ibnetdiscover(self.actor, self.principal, **data)
        return Response(DesignSerializer(self.queryset.get(pk=design.pk)).data, status=201)

    @extend_schema(responses={200: ImportJobSerializer})
    @action(detail=False, methods=["get"], url_path=r"imports/(?P<job_id>[0-9]+)")
    def import_job(self, request: Request, job_id: str) -> Response:
        """A large import: queued, running (its step and percent), done (its design) or failed."""
        job = import_jobs.read(int(job_id))
        if job is None:
            raise Http404
        return Response(import_jobs.job_json(job))

    @extend_schema(request=NodeTypesSerializer, responses={201: RevisionSerializer})
    @action(detail=True, methods=["post"], url_path="node-types")
    def node_types(self, request: Request, pk: str | None = None) -> Response:
        """Say which hosts are which servers, in bulk (``PATTERN NODE_TYPE`` lines or a
        ``host,node_type`` CSV): the next revision, its hosts with their GPUs (an imported
        fabric's hosts come in with none)."""
        serializer = NodeTypesSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        revision = services.assign_node_types(
            self.actor, self.principal, self._design(), serializer.validated_data["host_types"]
        )
        return Response(RevisionSerializer(revision).data, status=201)

    # --- revisions ------------------------------------------------------------------------
    def _design(self) -> Design:
        """The design of this request, looked up (and permission-checked) once."""
        if not hasattr(self, "_design_cache"):
            self._design_cache = self.get_object()
        return self._design_cache

    def _revision(self, number: str, *, with_graph: bool = True) -> DesignRevision:
        queryset = DesignRevision.objects.filter(design=self._design())
        if not with_graph:
            queryset = queryset.defer("graph")
        return get_object_or_404(queryset, number=number)

    @extend_schema(methods=["GET"], responses=RevisionBriefSerializer(many=True))
    @extend_schema(methods=["POST"], request=GraphPayloadSerializer, responses={201: RevisionSerializer})
    @action(detail=True, methods=["get", "post"])
    def revisions(self, request: Request, pk: str | None = None) -> Response:
        """List revisions, or save an edited graph as the next revision."""
        design = self.get_object()
        if request.method == "GET":
            rows = design.revisions.all()
            return Response(RevisionBriefSerializer(rows, many=True).data)
        serializer = GraphPayloadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        revision = services.add_revision(
            self.actor,
            self.principal,
            design,
            graph_data=serializer.validated_data["graph"],
            message=serializer.validated_data.get("message", ""),
            budget=REQUEST_BUDGET,
        )
        return Response(RevisionSerializer(revision).data, status=201)

    @extend_schema(responses=RevisionSerializer)
    @action(detail=True, methods=["get"], url_path=REVISION)
    def revision(self, request: Request, pk: str | None = None, number: str = "") -> Response:
        """One revision with its summary."""
        return Response(RevisionSerializer(self._revision(number, with_graph=False)).data)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"], url_path=REVISION + "/graph")
    def graph(self, request: Request, pk: str | None = None, number: str = "") -> Response:
        """The revision's full graph (the designer's JSON format)."""
        return Response(self._revision(number).graph)

    @extend_schema(
        parameters=[
            OpenApiParameter("level", str, enum=["auto", "fabric", "pod", "switch"]),
            OpenApiParameter(
                "focus",
                str,
                description="a group (pod-3, su-2) or a switch name; level=fabric with a pod of a 3-level "
                "rail-optimised design draws its SU level (its scalable units round its spines)",
            ),
            OpenApiParameter("diff_from", int, description="draw what changed from this revision"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["get"], url_path=REVISION + "/canvas")
    def canvas(self, request: Request, pk: str | None = None, number: str = "") -> Response:
        """Server-computed positions for the topology canvas, at a level of detail (or a diff drawn)."""
        level = request.query_params.get("level", "auto")
        if level not in ("auto", "fabric", "pod", "switch"):
            raise Invalid("level must be auto, fabric, pod or switch", fields={"level": [level]})
        other = request.query_params.get("diff_from") or ""
        if other and not other.isdigit():
            raise Invalid("diff_from must be a revision number", fields={"diff_from": [other]})
        revision = self._revision(number, with_graph=False)
        old = self._revision(other, with_graph=False).pk if other else None
        try:
            focus = request.query_params.get("focus") or None
            view = services.revision_canvas(revision.pk, level, focus, old)
        except (KeyError, ValueError) as exc:
            raise Invalid(f"cannot show that: {exc}", fields={"focus": [str(exc)]}) from None
        return Response(view)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"], url_path=REVISION + r"/diff/(?P<other>[0-9]+)")
    def diff(self, request: Request, pk: str | None = None, number: str = "", other: str = "") -> Response:
        """Switches, nodes and cables added, removed and changed between two revisions."""
        return Response(services.diff_revisions(self._revision(number), self._revision(other)))

    @extend_schema(
        responses={(200, "text/plain"): OpenApiTypes.STR},
        parameters=[OpenApiParameter("fmt", str, OpenApiParameter.PATH, enum=sorted(FORMATS))],
    )
    @action(detail=True, methods=["get"], url_path=REVISION + r"/export/(?P<fmt>[a-z0-9-]+)")
    def export(self, request: Request, pk: str | None = None, number: str = "", fmt: str = "") -> HttpResponse:
        """Download the revision in one of the export formats."""
        graph = services.revision_graph(self._revision(number))
        graph.meta["name"] = self._design().name
        try:
            content, filename, content_type = export(graph, fmt)
        except UnknownItemError as exc:
            raise Invalid(exc.message, fields={"format": sorted(FORMATS)}) from None
        response = HttpResponse(content, content_type=f"{content_type}; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=False, methods=["get"], url_path="formats")
    def formats(self, request: Request) -> Response:
        """The export formats: name → description."""
        return Response({name: f.description for name, f in sorted(FORMATS.items())})


class CatalogueEntryViewSet(GlobalResourceMixin, viewsets.ModelViewSet):
    """Operators' catalogue overrides (prices, power, additional models)."""

    global_reason = "the hardware catalogue is shared by every design"
    queryset = CatalogueEntry.objects.all()
    serializer_class = CatalogueEntrySerializer
    filterset_fields = ["kind"]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=False, methods=["get"])
    def effective(self, request: Request) -> Response:
        """The catalogue designs are planned with: built-ins with overrides applied."""
        return Response(services.catalogue_as_dict(services.load_catalogue()))

    def perform_create(self, serializer: BaseSerializer[CatalogueEntry]) -> None:
        serializer.instance = services.save_catalogue_entry(self.actor, self.principal, **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[CatalogueEntry]) -> None:
        entry = serializer.instance
        assert entry is not None  # an update always has the entry it updates
        serializer.instance = services.save_catalogue_entry(
            self.actor,
            self.principal,
            kind=entry.kind,
            name=entry.name,
            data=serializer.validated_data.get("data", entry.data),
        )

    def perform_destroy(self, instance: CatalogueEntry) -> None:
        services.delete_catalogue_entry(self.actor, self.principal, instance)


def _options(data: Any) -> dict:
    serializer = PlanOptionsSerializer(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
