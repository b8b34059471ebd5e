"""Tenancy endpoints: who am I, tenants, members, API tokens and the audit log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.tenancy import actions
from console.tenancy.api.base import (
    TenantScopedCreateReadViewSet,
    TenantScopedModelViewSet,
    TenantScopedReadOnlyViewSet,
)
from console.tenancy.api.serializers import (
    ApiTokenCreatedSerializer,
    ApiTokenCreateSerializer,
    ApiTokenSerializer,
    AuditEntrySerializer,
    MembershipSerializer,
    MembershipUpdateSerializer,
    MeSerializer,
    TenantSerializer,
)
from console.tenancy.filtersets import ApiTokenFilter, AuditEntryFilter, MembershipFilter
from console.tenancy.models import ApiToken, AuditEntry, Membership, Role, Tenant, TenantScopedQuerySet
from console.tenancy.permissions import principal_of

if TYPE_CHECKING:
    from django.contrib.auth.models import User as AuthUser  # the AUTH_USER_MODEL


class MeView(APIView):
    """The caller's identity, role and tenant."""

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        principal = principal_of(request)
        tenant = Tenant.objects.filter(pk=principal.tenant_id).first() if principal.tenant_id is not None else None
        data = {
            "username": request.user.get_username(),
            "role": principal.role,
            "tenant": TenantSerializer(tenant).data if tenant else None,
            "read_only": principal.read_only,
        }
        return Response(data)


class TenantViewSet(TenantScopedModelViewSet):
    """Tenants. Operators see and manage all; everyone else sees their own."""

    queryset = Tenant.objects.all()
    serializer_class = TenantSerializer
    write_roles = frozenset({Role.OPERATOR})
    filterset_fields = ["is_active", "slug"]
    ordering_fields = ["name", "created_at"]

    def perform_create(self, serializer: serializers.BaseSerializer[Any]) -> None:
        data = serializer.validated_data
        serializer.instance = actions.create_tenant(
            self.actor,
            self.principal,
            name=data["name"],
            slug=data.get("slug", ""),
            description=data.get("description", ""),
        )

    def perform_update(self, serializer: serializers.BaseSerializer[Any]) -> None:
        serializer.instance = actions.update_tenant(
            self.actor, self.principal, cast(Tenant, serializer.instance), **serializer.validated_data
        )

    def perform_destroy(self, instance: Tenant) -> None:
        actions.delete_tenant(self.actor, self.principal, instance)


class MembershipViewSet(TenantScopedModelViewSet):
    """Members and their roles. Tenant admins manage their own tenant's members."""

    queryset = Membership.objects.select_related("user", "tenant")
    serializer_class = MembershipSerializer
    write_roles = frozenset({Role.OPERATOR, Role.TENANT_ADMIN})
    filterset_class = MembershipFilter
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        if self.action == "partial_update":
            return MembershipUpdateSerializer
        return MembershipSerializer

    def perform_create(self, serializer: serializers.BaseSerializer[Any]) -> None:
        data = serializer.validated_data
        serializer.instance = actions.create_member(
            self.actor,
            self.principal,
            username=data["user"]["username"],
            email=data.get("user", {}).get("email", ""),
            password=data.get("password"),
            role=data["role"],
            tenant=data.get("tenant"),
        )

    @extend_schema(request=MembershipUpdateSerializer, responses=MembershipSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        membership = self.get_object()
        serializer = MembershipUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        membership = actions.update_member(
            self.actor, self.principal, membership, role=serializer.validated_data["role"]
        )
        return Response(MembershipSerializer(membership).data)

    def perform_destroy(self, instance: Membership) -> None:
        actions.remove_member(self.actor, self.principal, instance)


class ApiTokenViewSet(TenantScopedCreateReadViewSet):
    """API tokens. Members see their own; tenant admins their tenant's; operators all.
    The secret is returned once, at creation."""

    queryset = ApiToken.objects.select_related("user")
    serializer_class = ApiTokenSerializer
    filterset_class = ApiTokenFilter

    def narrow_queryset(self, queryset: TenantScopedQuerySet) -> TenantScopedQuerySet:
        principal = self.principal
        if principal.role in (Role.OPERATOR, Role.AUDITOR, Role.TENANT_ADMIN):
            return queryset
        return queryset.filter(user_id=principal.user_id)

    @extend_schema(request=ApiTokenCreateSerializer, responses={201: ApiTokenCreatedSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = ApiTokenCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        token, plaintext = actions.issue_token(
            self.actor,
            self.principal,
            user=cast("AuthUser", request.user),  # ConsolePermission admits only signed-in users
            name=data["name"],
            expires_in_days=data.get("expires_in_days"),
            read_only=data["read_only"],
        )
        body = ApiTokenSerializer(token).data | {"token": plaintext}
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=ApiTokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        """Revoke the token now; its next request is refused and its sockets close."""
        token = actions.revoke_token(self.actor, self.principal, self.get_object())
        return Response(ApiTokenSerializer(token).data)


class AuditEntryViewSet(TenantScopedReadOnlyViewSet):
    """The audit log. Operators and auditors read all of it; tenant admins their tenant's."""

    queryset = AuditEntry.objects.all()
    serializer_class = AuditEntrySerializer
    read_roles = frozenset({Role.OPERATOR, Role.AUDITOR, Role.TENANT_ADMIN})
    filterset_class = AuditEntryFilter
    ordering_fields = ["created_at", "id"]
