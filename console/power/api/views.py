"""Node power and BMC endpoints: operators act, operators and auditors read, tenants are refused
(a node's power and its management controller are the operator's business)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.power import services
from console.power.api.serializers import (
    BmcInputSerializer,
    BmcSerializer,
    NodePowerSerializer,
    PowerActionSerializer,
)
from console.power.models import Bmc, PowerEvent
from console.tenancy.api.base import PrincipalMixin
from console.tenancy.errors import Forbidden, NotFound
from console.tenancy.permissions import require_operator
from scheduling.models import Node

HISTORY = 20


def _node(node_id: int) -> Node:
    node = Node.objects.filter(pk=node_id).first()
    if node is None:
        raise NotFound("no such node")
    return node


def _power(node: Node) -> dict[str, Any]:
    return {
        "node": node.pk,
        "name": node.name,
        "power_state": node.power_state,
        "changed_at": node.power_changed_at,
        "boot_s": int(services.boot_time(node).total_seconds()),
        "bmc": Bmc.objects.filter(node=node).first(),
        "history": list(PowerEvent.objects.filter(node=node)[:HISTORY]),
    }


class _OperatorView(PrincipalMixin, APIView):
    def _read_check(self) -> None:
        if not self.principal.sees_all_tenants:
            raise Forbidden("only operators and auditors see node power")


class NodePowerView(_OperatorView):
    """A node's power state and history (GET); power it on, off or force it off (POST, operators).
    A power-off while a reservation needs the node within its boot time plus margin is a 409
    ``node_needed`` naming the reservations."""

    @extend_schema(responses=NodePowerSerializer)
    def get(self, request: Request, node_id: int) -> Response:
        self._read_check()
        return Response(NodePowerSerializer(_power(_node(node_id))).data)

    @extend_schema(
        request=PowerActionSerializer,
        responses={202: NodePowerSerializer, 409: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request, node_id: int) -> Response:
        require_operator(self.principal, to="switch nodes on and off")
        _node(node_id)
        body = PowerActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        action, reason = body.validated_data["action"], body.validated_data["reason"]
        if action == "on":
            node = services.power_on(node_id, actor=self.actor, reason=reason)
        else:
            node = services.power_off(node_id, actor=self.actor, reason=reason, force=action == "force-off")
        return Response(NodePowerSerializer(_power(node)).data, status=status.HTTP_202_ACCEPTED)


class NodeBmcView(_OperatorView):
    """A node's BMC: driver, address, credentials (PUT, operators; the password is stored
    encrypted and never returned)."""

    @extend_schema(responses=BmcSerializer)
    def get(self, request: Request, node_id: int) -> Response:
        self._read_check()
        bmc = Bmc.objects.filter(node=_node(node_id)).first()
        if bmc is None:
            raise NotFound("this node has no BMC configured")
        return Response(BmcSerializer(bmc).data)

    @extend_schema(request=BmcInputSerializer, responses=BmcSerializer)
    def put(self, request: Request, node_id: int) -> Response:
        require_operator(self.principal, to="configure BMCs")
        _node(node_id)
        body = BmcInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        bmc = services.set_bmc(node_id, actor=self.actor, data=dict(body.validated_data))
        return Response(BmcSerializer(bmc).data)
