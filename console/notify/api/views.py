"""Webhooks (tenant admins manage, operators and auditors read), their delivery log, a test
event, and the caller's own e-mail preferences."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.notify import services
from console.notify.api.serializers import (
    DeliverySerializer,
    PreferenceSerializer,
    WebhookCreatedSerializer,
    WebhookSerializer,
    WebhookWriteSerializer,
)
from console.notify.models import Delivery, Preference, Webhook, all_event_types
from console.tenancy import audit
from console.tenancy.api.base import PrincipalMixin, TenantScopedModelViewSet
from console.tenancy.models import Role

ADMIN_ROLES = frozenset({Role.OPERATOR, Role.TENANT_ADMIN})


class WebhookViewSet(TenantScopedModelViewSet):
    """A tenant's webhooks. Tenant admins manage their tenant's; operators any tenant's;
    auditors read. Members neither see nor change them (URLs and delivery payloads are the
    admins' configuration). The secret is write-only: returned once, when generated at creation."""

    queryset = Webhook.objects.all()
    serializer_class = WebhookSerializer
    read_roles = frozenset({Role.OPERATOR, Role.AUDITOR, Role.TENANT_ADMIN})
    write_roles = ADMIN_ROLES
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        if self.action in ("create", "partial_update"):
            return WebhookWriteSerializer
        if self.action == "deliveries":
            return DeliverySerializer
        return WebhookSerializer

    @extend_schema(request=WebhookWriteSerializer, responses={201: WebhookCreatedSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = WebhookWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        webhook, secret = services.create_webhook(
            self.actor,
            self.principal,
            tenant=self.tenant_for_create(serializer),
            name=data["name"],
            url=data["url"],
            events=data.get("events") or all_event_types(),
            secret=data.get("secret", ""),
        )
        body = WebhookSerializer(webhook).data | {"secret": secret}
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=WebhookWriteSerializer, responses=WebhookSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        webhook = self.get_object()
        serializer = WebhookWriteSerializer(webhook, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        changes = {k: v for k, v in serializer.validated_data.items() if k != "tenant"}
        webhook = services.update_webhook(self.actor, self.principal, webhook, **changes)
        return Response(WebhookSerializer(webhook).data)

    def perform_destroy(self, instance: Webhook) -> None:
        services.delete_webhook(self.actor, self.principal, instance)

    @extend_schema(request=None, responses=DeliverySerializer(many=True))
    @action(detail=True, methods=["get"])
    def deliveries(self, request: Request, pk: str | None = None) -> Response:
        """The webhook's deliveries, newest first, each with its attempts."""
        webhook = self.get_object()
        rows = Delivery.objects.filter(webhook=webhook).select_related("event").prefetch_related("attempt_log")
        page = self.paginate_queryset(rows)
        data = DeliverySerializer(page if page is not None else rows, many=True).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    @extend_schema(request=None, responses={202: DeliverySerializer})
    @action(detail=True, methods=["post"])
    def test(self, request: Request, pk: str | None = None) -> Response:
        """Send a ``webhook.test`` event to this webhook now (through the same delivery path)."""
        delivery = services.send_test(self.actor, self.principal, self.get_object())
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class PreferenceView(PrincipalMixin, APIView):
    """The caller's e-mail preferences: about their own reservations (default on) and about all
    of their tenant's (default off)."""

    @property
    def _user_id(self) -> int:
        return int(self.request.user.pk or 0)  # ConsolePermission admits only signed-in users

    @extend_schema(responses=PreferenceSerializer)
    def get(self, request: Request) -> Response:
        pref = Preference.objects.filter(user_id=self._user_id).first() or Preference()
        return Response(PreferenceSerializer(pref).data)

    @extend_schema(request=PreferenceSerializer, responses=PreferenceSerializer)
    def patch(self, request: Request) -> Response:
        serializer = PreferenceSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        with transaction.atomic():
            pref, _ = Preference.objects.select_for_update().get_or_create(user_id=self._user_id)
            before = audit.snapshot(pref)
            for key, value in serializer.validated_data.items():
                setattr(pref, key, value)
            pref.save()
            audit.record(self.actor, "notify.preference.update", pref, before=before, after=audit.snapshot(pref))
        return Response(PreferenceSerializer(pref).data)
