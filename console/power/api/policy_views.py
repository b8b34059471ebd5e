"""A pool's power policy, its runs and the pins of nodes: operators write, operators and
auditors read, tenants are refused (403), like the node power endpoints."""

from __future__ import annotations

import datetime as dt
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from console.power import policy
from console.power.api.policy_serializers import (
    PolicyRunInputSerializer,
    PolicyRunSerializer,
    PowerPinInputSerializer,
    PowerPinSerializer,
    PowerPolicySerializer,
)
from console.power.api.views import _node, _OperatorView
from console.power.models import PolicyRun, PoolPowerPolicy, PowerPin
from console.tenancy.errors import NotFound
from console.tenancy.permissions import require_operator
from scheduling.models import Pool

RUNS = 50


def _pool(pk: int) -> Pool:
    pool = Pool.objects.filter(pk=pk).first()
    if pool is None:
        raise NotFound("no such pool")
    return pool


def policy_body(stored: PoolPowerPolicy) -> dict[str, Any]:
    """The API's view of a stored (or default) policy, with the pool's pins."""
    return {
        "pool": stored.pool_id,
        "enabled": stored.enabled,
        "dry_run": stored.dry_run,
        "idle_after_s": int(stored.idle_after.total_seconds()),
        "buffer_nodes": stored.buffer_nodes,
        "buffer_percent": stored.buffer_percent,
        "margin_s": int(stored.margin.total_seconds()),
        "max_actions_per_minute": stored.max_actions_per_minute,
        "enabled_at": stored.enabled_at,
        "updated_at": stored.updated_at,
        "updated_by": stored.updated_by,
        "pins": list(PowerPin.objects.filter(node__pools=stored.pool_id).select_related("node")),
    }


def policy_data(validated: dict[str, Any]) -> dict[str, Any]:
    """Validated API fields -> :func:`console.power.policy.set_policy`'s data."""
    data = {k: v for k, v in validated.items() if k not in ("idle_after_s", "margin_s")}
    for field in ("idle_after", "margin"):
        if f"{field}_s" in validated:
            data[field] = dt.timedelta(seconds=validated[f"{field}_s"])
    return data


class PoolPowerPolicyView(_OperatorView):
    """A pool's power policy (GET: operators and auditors; PUT: operators). A pool that never had
    one shows the defaults (disabled)."""

    @extend_schema(responses=PowerPolicySerializer)
    def get(self, request: Request, pk: int) -> Response:
        self._read_check()
        return Response(PowerPolicySerializer(policy_body(policy.policy_of(_pool(pk)))).data)

    @extend_schema(request=PowerPolicySerializer, responses=PowerPolicySerializer)
    def put(self, request: Request, pk: int) -> Response:
        require_operator(self.principal, to="set power policies")
        _pool(pk)
        body = PowerPolicySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        stored = policy.set_policy(pk, actor=self.actor, data=policy_data(dict(body.validated_data)))
        return Response(PowerPolicySerializer(policy_body(stored)).data)


class PoolPowerPolicyRunView(_OperatorView):
    """Run the pool's policy now (operators); ``{"dry_run": true}`` only reports. Returns the run."""

    @extend_schema(request=PolicyRunInputSerializer, responses={201: PolicyRunSerializer})
    def post(self, request: Request, pk: int) -> Response:
        require_operator(self.principal, to="run power policies")
        _pool(pk)
        body = PolicyRunInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = policy.apply(pk, actor=self.actor, trigger="operator", dry_run=body.validated_data["dry_run"])
        return Response(PolicyRunSerializer(run).data, status=status.HTTP_201_CREATED)


class PoolPowerPolicyRunsView(_OperatorView):
    """The pool's recent policy runs, newest first (operators and auditors)."""

    @extend_schema(responses=PolicyRunSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        self._read_check()
        runs = PolicyRun.objects.filter(pool=_pool(pk))[:RUNS]
        return Response(PolicyRunSerializer(runs, many=True).data)


class NodePowerPinView(_OperatorView):
    """Pin a node on (PUT, with a reason) or take the pin away (DELETE); operators only."""

    @extend_schema(request=PowerPinInputSerializer, responses=PowerPinSerializer)
    def put(self, request: Request, node_id: int) -> Response:
        require_operator(self.principal, to="pin nodes on")
        _node(node_id)
        body = PowerPinInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        pinned = policy.pin(node_id, actor=self.actor, reason=body.validated_data["reason"])
        return Response(PowerPinSerializer(pinned).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, node_id: int) -> Response:
        require_operator(self.principal, to="unpin nodes")
        _node(node_id)
        policy.unpin(node_id, actor=self.actor)
        return Response(status=status.HTTP_204_NO_CONTENT)
