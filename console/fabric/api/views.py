"""Fabric endpoints: fabrics, their partitions and port administration (desired state) and
change requests.

Thin: every write calls a service of :mod:`console.fabric.changes` (permission check, precise
validation, change and audit row together). Operators write; operators and auditors read;
tenant users get 403 (fabrics belong to the operator, not to a tenant).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from console.fabric import changes, isolation
from console.fabric.agents import services as agent_services
from console.fabric.api.serializers import (
    AgentCreatedSerializer,
    AgentCreateSerializer,
    AgentSerializer,
    ChangeCreateSerializer,
    ChangeListSerializer,
    ChangeSerializer,
    FabricSerializer,
    IsolationSerializer,
    PartitionSerializer,
    PortAdminSerializer,
    QosTableSerializer,
    QosViewSerializer,
)
from console.fabric.changes.qos import qos_view, set_qos_table
from console.fabric.filtersets import ChangeRequestFilterSet
from console.fabric.models import ChangeRequest, Fabric, FabricAgent, FabricPartition, PortAdminState
from console.tenancy.api.base import GlobalResourceMixin
from console.tenancy.errors import Invalid
from console.tenancy.models import Role

READERS = frozenset({Role.OPERATOR, Role.AUDITOR})
FABRIC_PK = OpenApiParameter("fabric_pk", int, OpenApiParameter.PATH, description="fabric id")
_NESTED = extend_schema(parameters=[FABRIC_PK])


class FabricViewSet(GlobalResourceMixin, viewsets.ModelViewSet):
    """Managed fabrics: one InfiniBand subnet each, bound to a design revision and a driver."""

    global_reason = "a fabric is the operator's network, shared by every tenant"
    read_roles = READERS
    queryset = Fabric.objects.all()
    serializer_class = FabricSerializer
    filterset_fields = ["driver"]
    ordering_fields = ["name", "created_at"]

    def perform_create(self, serializer: BaseSerializer[Fabric]) -> None:
        serializer.instance = changes.create_fabric(self.actor, self.principal, **serializer.validated_data)

    def perform_update(self, serializer: BaseSerializer[Fabric]) -> None:
        fabric = serializer.instance
        assert fabric is not None  # an update always has its object
        serializer.instance = changes.update_fabric(self.actor, self.principal, fabric, **serializer.validated_data)

    def perform_destroy(self, instance: Fabric) -> None:
        changes.delete_fabric(self.actor, self.principal, instance)

    @extend_schema(methods=["GET"], request=None, responses={200: QosViewSerializer})
    @extend_schema(methods=["PUT"], request=QosTableSerializer, responses={200: QosViewSerializer})
    @action(detail=True, methods=["get", "put"], url_path="qos")
    def qos(self, request: Request, pk: str | None = None) -> Response:
        """The QoS table (class → SL, VL, arbitration weight; high limit), what it renders to, the
        ports a push reprograms and the pending diff. PUT stores a new table (desired state,
        validated and linted, audited); a change request pushes it and verifies it on the ports."""
        fabric = self.get_object()
        if request.method == "PUT":
            shape = QosTableSerializer(data=_object(request.data))
            shape.is_valid(raise_exception=True)
            set_qos_table(self.actor, self.principal, fabric, dict(shape.validated_data))
        return Response(qos_view(fabric))

    @extend_schema(methods=["GET"], request=None, responses={200: AgentSerializer(many=True)})
    @extend_schema(methods=["POST"], request=AgentCreateSerializer, responses={201: AgentCreatedSerializer})
    @action(detail=True, methods=["get", "post"], url_path="agents", pagination_class=None)  # a fabric's few
    def agents(self, request: Request, pk: str | None = None) -> Response:
        """The agents on the fabric's subnet-manager hosts: name, host, version, last_seen,
        connected and their OpenSM's sm_state, sm_priority and port_guid. POST creates one
        (operators; its token is in the answer, once); it connects with ``manage.py agent``."""
        fabric = self.get_object()
        if request.method == "POST":
            made = agent_services.create_agent(
                self.actor, self.principal, fabric, name=_object(request.data).get("name")
            )
            row = next(a for a in agent_services.agents_json(fabric) if a["id"] == made.agent.pk)
            return Response({**row, "token": made.token}, status=status.HTTP_201_CREATED)
        return Response(agent_services.agents_json(fabric))

    @extend_schema(request=None, responses={200: AgentSerializer})
    @action(detail=True, methods=["post"], url_path=r"agents/(?P<agent_pk>[0-9]+)/revoke")
    def revoke_agent(self, request: Request, pk: str | None = None, agent_pk: str | None = None) -> Response:
        """Revoke an agent's token (operators): its socket closes and it is refused from now on."""
        fabric = self.get_object()
        agent = get_object_or_404(FabricAgent, fabric=fabric, pk=agent_pk)
        agent_services.revoke_agent(self.actor, self.principal, agent)
        return Response(next(a for a in agent_services.agents_json(fabric) if a["id"] == agent.pk))

    @extend_schema(request=None, responses={200: IsolationSerializer})
    @action(detail=True, methods=["get"], url_path="isolation")
    def isolation(self, request: Request, pk: str | None = None) -> Response:
        """The last isolation audit: SA paths sampled between hosts of different tenants and free
        hosts (``leaks``: any is a critical alarm), P_Key tables read, the SM host's partitions
        against the isolation rule and its files against what the console wrote."""
        return Response(isolation.as_json(isolation.latest(self.get_object())))


def _object(data: Any) -> dict[str, Any]:
    """The request body as a dict; anything else (a list, a scalar) is a precise 400."""
    if not hasattr(data, "keys"):
        raise Invalid("expected a JSON object", fields={"non_field_errors": ["object"]})
    return dict(data)


class _FabricChild(GlobalResourceMixin):
    """Routes below ``/api/fabrics/{fabric_pk}/``: an unknown fabric answers 404."""

    global_reason = "partitions and changes belong to a fabric, which no tenant owns"
    read_roles = READERS
    # Set by the view machinery (GenericViewSet) this mixin is always combined with.
    kwargs: dict[str, Any]

    def fabric(self) -> Fabric:
        if not hasattr(self, "_fabric"):
            self._fabric = get_object_or_404(Fabric, pk=self.kwargs["fabric_pk"])
        return self._fabric


@extend_schema_view(
    list=_NESTED, retrieve=_NESTED, create=_NESTED, update=_NESTED, partial_update=_NESTED, destroy=_NESTED
)
class FabricPartitionViewSet(_FabricChild, viewsets.ModelViewSet):
    """A fabric's partitions (desired state). Writes are linted up front and audited; a change
    request pushes them."""

    serializer_class = PartitionSerializer
    queryset = FabricPartition.objects.all()

    def get_queryset(self) -> QuerySet[FabricPartition]:
        return FabricPartition.objects.filter(fabric=self.fabric()).order_by("pkey").prefetch_related("allowed_tenants")

    def _set(self, data: dict[str, Any], *, name: str, status_code: int) -> Response:
        shape = PartitionSerializer(data=data, partial=True)
        shape.is_valid(raise_exception=True)
        service = None
        if data.get("source", "manual") not in ("manual", "service"):
            raise Invalid("source is manual or service", fields={"source": ["manual or service"]})
        if data.get("source") == FabricPartition.Source.SERVICE:
            service = changes.service_access(data.get("allowed_tenants") or [], data.get("description", ""))
        row = changes.set_partition(
            self.actor,
            self.principal,
            self.fabric(),
            name=name,
            pkey=data.get("pkey"),
            members=data.get("members") or [],
            sl=data.get("sl", 0),
            ipoib=bool(data.get("ipoib", False)),
            service=service,
        )
        return Response(PartitionSerializer(row).data, status=status_code)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Add a partition (P_Key, members with full/limited membership)."""
        self.fabric()
        name: Any = request.data.get("name")  # unchecked input: set_partition validates it
        if FabricPartition.objects.filter(fabric=self.fabric(), name=name).exists():
            raise Invalid(f"partition {name!r} exists; update it instead", fields={"name": [name]})
        return self._set(dict(request.data), name=name, status_code=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Replace (PUT) or change (PATCH) a partition; renaming is delete + create."""
        row = self.get_object()
        if row.source == FabricPartition.Source.OPERATOR:
            text: Any = _object(request.data).get("raw")  # unchecked input: the service validates it
            row = changes.set_operator_partition(self.actor, self.principal, self.fabric(), name=row.name, raw=text)
            return Response(PartitionSerializer(row).data)
        data = {
            "pkey": f"{row.pkey:#06x}",
            "members": row.members if row.source != FabricPartition.Source.SERVICE else [m for m in row.members],
            "sl": row.sl,
            "ipoib": row.ipoib,
            "source": row.source,
            "allowed_tenants": sorted(t.pk for t in row.allowed_tenants.all()),
            "description": row.description,
            **dict(request.data),
        }
        if data.get("name", row.name) != row.name:
            raise Invalid("partitions are not renamed: delete and create", fields={"name": []})
        return self._set(data, name=row.name, status_code=status.HTTP_200_OK)

    def perform_destroy(self, instance: FabricPartition) -> None:
        changes.delete_partition(self.actor, self.principal, self.fabric(), name=instance.name)


@extend_schema_view(
    list=_NESTED, retrieve=_NESTED, create=_NESTED, update=_NESTED, partial_update=_NESTED, destroy=_NESTED
)
class FabricPortViewSet(_FabricChild, viewsets.ModelViewSet):
    """Switch port administration (desired state): a port enabled or disabled, optionally with
    its enabled link width and speed. Checked against the fabric's design and audited; a change
    request pushes it (over SMPs, read back)."""

    serializer_class = PortAdminSerializer
    queryset = PortAdminState.objects.all()
    filterset_fields = ["switch", "enabled"]

    def get_queryset(self) -> QuerySet[PortAdminState]:
        return PortAdminState.objects.filter(fabric=self.fabric()).order_by("switch", "port")

    def _set(self, data: dict[str, Any], *, status_code: int) -> Response:
        shape = PortAdminSerializer(data=data, partial=True)
        shape.is_valid(raise_exception=True)
        row = changes.set_port_admin(
            self.actor,
            self.principal,
            self.fabric(),
            switch=data.get("switch"),
            port=data.get("port"),
            enabled=shape.validated_data.get("enabled", True),
            width=data.get("width"),
            speed=data.get("speed"),
            reason=data.get("reason") or "",
        )
        return Response(PortAdminSerializer(row).data, status=status_code)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Administer a switch port (by switch name from the design and port number)."""
        self.fabric()
        data = _object(request.data)
        port: Any = data.get("port")  # unchecked input: set_port_admin validates it
        exists = PortAdminState.objects.filter(fabric=self.fabric(), switch=data.get("switch"), port=port)
        if isinstance(port, int) and exists.exists():
            detail = f"{data['switch']}[{data['port']}] is already administered; update it instead"
            raise Invalid(detail, fields={"port": [detail]})
        return self._set(data, status_code=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Replace (PUT) or change (PATCH) a port's wanted state; switch and port stay."""
        row = self.get_object()
        data = {
            "switch": row.switch,
            "port": row.port,
            "enabled": row.enabled,
            "width": row.width,
            "speed": row.speed,
            "reason": row.reason,
            **_object(request.data),
        }
        if data["switch"] != row.switch or data["port"] != row.port:
            detail = "a port's switch and number do not change: delete and create"
            raise Invalid(detail, fields={"switch": [detail], "port": [detail]})
        return self._set(data, status_code=status.HTTP_200_OK)

    def perform_destroy(self, instance: PortAdminState) -> None:
        changes.clear_port_admin(self.actor, self.principal, self.fabric(), switch=instance.switch, port=instance.port)


@extend_schema_view(list=_NESTED, retrieve=_NESTED, approve=_NESTED, cancel=_NESTED)
class FabricChangeViewSet(
    _FabricChild,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Change requests of a fabric: create (or dry-run), approve, cancel; steps and progress."""

    queryset = ChangeRequest.objects.all()
    # The filterset orders too (``?ordering=-created_at``), as the console's list page does.
    filter_backends = [DjangoFilterBackend]
    filterset_class = ChangeRequestFilterSet

    def get_queryset(self) -> QuerySet[ChangeRequest]:
        return ChangeRequest.objects.filter(fabric=self.fabric()).prefetch_related("steps")

    def get_serializer_class(self) -> type[BaseSerializer]:
        return ChangeListSerializer if self.action == "list" else ChangeSerializer

    @extend_schema(parameters=[FABRIC_PK], request=ChangeCreateSerializer, responses={201: ChangeSerializer})
    def create(self, request: Request, fabric_pk: str | None = None) -> Response:
        """Snapshot desired state and queue its push (``dry_run``: only compute the diff)."""
        serializer = ChangeCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        change = changes.request_change(self.actor, self.principal, self.fabric(), **serializer.validated_data)
        return Response(ChangeSerializer(change).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: ChangeSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, fabric_pk: str | None = None, pk: str | None = None) -> Response:
        """Approve a pending change (an operator other than its requester)."""
        change = changes.approve(self.actor, self.principal, self.get_object())
        return Response(ChangeSerializer(change).data)

    @extend_schema(request=None, responses={200: ChangeSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, fabric_pk: str | None = None, pk: str | None = None) -> Response:
        """Cancel a change that has not started."""
        change = changes.cancel(self.actor, self.principal, self.get_object())
        return Response(ChangeSerializer(change).data)
