"""Telemetry API: events (tenant-scoped), live snapshots, link detail and history, a switch's
port table, /metrics."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status as http
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.fabric.models import Fabric
from console.telemetry import services, store
from console.telemetry.api.serializers import FabricEventSerializer, OverviewSerializer, SwitchPortsSerializer
from console.telemetry.metrics import metrics_allowed, metrics_text
from console.telemetry.models import FabricEvent
from console.telemetry.overview import overview_for
from console.telemetry.snapshots import link_for, snapshot_for, switch_ports, visible_links
from console.tenancy.api.base import PrincipalMixin, TenantScopedReadOnlyViewSet
from console.tenancy.errors import Invalid, NotFound
from console.tenancy.models import Principal, Role


class FabricEventViewSet(TenantScopedReadOnlyViewSet):
    """Fabric events: operators and auditors see all; a tenant only events touching its
    reservations. Operators acknowledge and resolve (audited, streamed)."""

    queryset = FabricEvent.objects.prefetch_related("tenants")
    serializer_class = FabricEventSerializer
    filterset_fields = ["fabric", "kind", "status", "severity"]
    write_roles = frozenset({Role.OPERATOR})

    @extend_schema(request=None, responses=FabricEventSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request: Request, pk: str | None = None) -> Response:
        event = services.acknowledge(self.actor, self.principal, self.get_object())
        return Response(self.get_serializer(event).data)

    @extend_schema(request=None, responses=FabricEventSerializer)
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, pk: str | None = None) -> Response:
        event = services.resolve(self.actor, self.principal, self.get_object())
        return Response(self.get_serializer(event).data)


def _fabric(fabric_id: int) -> Fabric:
    return get_object_or_404(Fabric.objects.select_related("revision"), pk=fabric_id)


class LiveSnapshotView(PrincipalMixin, APIView):
    """The live state a client resyncs from: links (yours only, for tenants), your group and
    its last sequence number."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, fabric_id: int) -> Response:
        _fabric(fabric_id)
        return Response(snapshot_for(fabric_id, self.principal))


class OverviewView(PrincipalMixin, APIView):
    """The dashboard's figures: fabrics' health, GPUs, reservations, change requests (a tenant's
    own version for tenants)."""

    @extend_schema(responses=OverviewSerializer)
    def get(self, request: Request) -> Response:
        return Response(OverviewSerializer(overview_for(self.principal)).data)


class LinkDetailView(PrincipalMixin, APIView):
    """One link: live counters and its history (``minutes``, default 15)."""

    @extend_schema(responses=OpenApiTypes.OBJECT, parameters=[OpenApiParameter("minutes", int)])
    def get(self, request: Request, fabric_id: int, link_id: str) -> Response:
        _fabric(fabric_id)
        live = link_for(fabric_id, link_id, self.principal)
        minutes = _minutes(request)
        since = timezone.now() - dt.timedelta(minutes=minutes)
        series = services.history(fabric_id, [link_id], since=since).get(link_id, [])
        return Response({"link": live, "history": series, "columns": ["t", "tx_bps", "rx_bps", "util", "errors"]})


class SwitchPortsView(PrincipalMixin, APIView):
    """One switch's port table: every port's peer (device and port), designed rate, link state,
    Tx/Rx and error counters. Operators and auditors see every port; a tenant only the ports of
    its own reservations' links, and a switch with none of them is 404. Rows follow the live
    stream (``link.delta`` of ``group``) by their ``link`` id."""

    @extend_schema(responses=SwitchPortsSerializer)
    def get(self, request: Request, fabric_id: int, switch: str) -> Response:
        return Response(switch_ports(_fabric(fabric_id), switch, self.principal))


class HistoryView(PrincipalMixin, APIView):
    """History per link, switch, reservation or tenant (tenants: only their own links)."""

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        parameters=[
            OpenApiParameter("link", str),
            OpenApiParameter("switch", str),
            OpenApiParameter("reservation", int),
            OpenApiParameter("tenant", int),
            OpenApiParameter("minutes", int),
        ],
    )
    def get(self, request: Request, fabric_id: int) -> Response:
        _fabric(fabric_id)
        principal = self.principal
        snap = store.load_snapshot(fabric_id) or {}
        allowed = visible_links(snap, principal)
        links = self._links(request, fabric_id, snap, principal)
        if allowed is not None:
            links = allowed if links is None else links & allowed
        since = timezone.now() - dt.timedelta(minutes=_minutes(request))
        series = services.history(fabric_id, links, since=since)
        if request.query_params.get("switch"):
            prefix = request.query_params["switch"] + "/"
            series = {k: v for k, v in series.items() if k.startswith(prefix)}
        return Response({"fabric": fabric_id, "links": series, "columns": ["t", "tx_bps", "rx_bps", "util", "errors"]})

    def _links(self, request: Request, fabric_id: int, snap: dict[str, Any], principal: Principal) -> set[str] | None:
        q = request.query_params
        if q.get("link"):
            return {q["link"]}
        tenants = snap.get("tenants") or {}
        if q.get("reservation"):
            rid = q["reservation"]
            for tid, body in tenants.items():
                if rid in (body.get("reservations") or {}):
                    if not principal.sees_all_tenants and tid != str(principal.tenant_id):
                        break
                    return _host_links_of(snap, tid, rid)
            raise NotFound(f"no ready reservation {rid} on fabric {fabric_id}")
        if q.get("tenant"):
            tid = q["tenant"]
            if not principal.sees_all_tenants and tid != str(principal.tenant_id):
                raise NotFound(f"no tenant {tid}")
            return set((tenants.get(tid) or {}).get("links", []))
        return None


def _host_links_of(snap: dict[str, Any], tid: str, rid: str) -> set[str]:
    return set((snap["tenants"][tid].get("reservation_links") or {}).get(rid, []))


def _minutes(request: Request) -> int:
    try:
        minutes = int(request.query_params.get("minutes", 15))
    except ValueError:
        raise Invalid("minutes must be an integer", fields={"minutes": ["integer"]}) from None
    return max(1, min(minutes, 7 * 24 * 60))


def metrics(request: HttpRequest) -> HttpResponse:
    """``/metrics``: Prometheus text (operator/auditor session or ``METRICS_TOKEN`` bearer)."""
    if not metrics_allowed(request, settings.METRICS_TOKEN):
        return HttpResponse("forbidden\n", status=http.HTTP_403_FORBIDDEN, content_type="text/plain")
    return HttpResponse(metrics_text(), content_type="text/plain; version=0.0.4")
