"""``GET /api/search/?q=``: typed results scoped to who asks (see :mod:`console.telemetry.search`)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.telemetry.search import search
from console.tenancy.api.base import PrincipalMixin

_HIT = inline_serializer(
    "SearchHit",
    {
        "kind": serializers.ChoiceField(
            ["switch", "node", "reservation", "design", "fabric", "tenant", "partition", "cable"]
        ),
        "label": serializers.CharField(),
        "url": serializers.CharField(),
        "fields": serializers.DictField(),
    },
    many=True,
)


class _Query(serializers.Serializer):
    # DRF's CharField refuses NUL characters (400), which the database could not compare
    q = serializers.CharField(allow_blank=True, required=False, default="", trim_whitespace=False)


class SearchView(PrincipalMixin, APIView):
    """Switch and node names, node and port GUIDs (any spelling), LIDs (``lid:12`` or a bare
    number), P_Keys (``0x8a11`` = ``0x0a11``), cables (``leaf[12]``), reservation names and ids,
    design names and tenants (operators and auditors). A tenant finds only its own reservations,
    their nodes and partitions."""

    @extend_schema(
        parameters=[OpenApiParameter("q", str, required=True, description="what to look for")],
        responses=inline_serializer("SearchResults", {"q": serializers.CharField(), "results": _HIT}),
    )
    def get(self, request: Request) -> Response:
        query = _Query(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = str(query.validated_data["q"])
        return Response({"q": q, "results": search(self.principal, q)})
