"""The one tenant-scoped viewset base every tenant-owned API uses.

Scoping cannot be bypassed: subclasses may not override ``get_queryset``; they may only narrow
with ``narrow_queryset``, and the tenant filter is applied after it. Objects of other tenants are
therefore never found: they answer 404, for every verb and custom action.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

from django.db import models, transaction
from rest_framework import mixins, serializers, viewsets

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Invalid
from console.tenancy.models import ApiToken, Principal, Tenant, TenantScopedQuerySet
from console.tenancy.permissions import principal_of

if TYPE_CHECKING:  # the mixins only ever mix into an APIView; this gives them its request
    from rest_framework.views import APIView as _MixinBase
else:
    _MixinBase = object


class PrincipalMixin(_MixinBase):
    """Who is asking (for scoping and permissions) and who is acting (for the audit log)."""

    # Set per action (``@action(..., safe_post=True)``) for POSTs that compute but change nothing.
    safe_post: ClassVar[bool] = False

    @property
    def principal(self) -> Principal:
        return principal_of(self.request)

    @property
    def actor(self) -> Actor:
        token = self.request.auth if isinstance(self.request.auth, ApiToken) else None
        return Actor.for_user(self.request.user, token)


class GlobalResourceMixin(PrincipalMixin):
    """A viewset over data that belongs to no tenant (designs, the hardware catalogue).

    It must say why in ``global_reason``; the isolation meta-test lists every such viewset.
    Reads are limited by ``read_roles``; writes by ``write_roles`` (operators by default).
    """

    global_reason: ClassVar[str] = ""
    write_roles: ClassVar[frozenset[str]] = frozenset({"operator"})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.global_reason:
            raise TypeError(f"{cls.__name__} must explain in global_reason why no tenant owns it")


class TenantScopedMixin(PrincipalMixin):
    """Scoping, principal and actor for a viewset; see the module docstring."""

    # GenericAPIView's own declaration; what a subclass assigns must be a TenantScopedQuerySet.
    queryset: models.QuerySet[Any] | models.Manager[Any] | None
    audit_object_type: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "get_queryset" in cls.__dict__:
            raise TypeError(
                f"{cls.__name__} overrides get_queryset; override narrow_queryset instead so the "
                "tenant filter stays last"
            )

    def narrow_queryset(self, queryset: TenantScopedQuerySet) -> TenantScopedQuerySet:
        return queryset

    def get_queryset(self) -> TenantScopedQuerySet:
        queryset = self.narrow_queryset(self._all_rows())
        return queryset.visible_to(self.principal)

    def _all_rows(self) -> TenantScopedQuerySet:
        rows = self.queryset.all() if self.queryset is not None else None
        if not isinstance(rows, TenantScopedQuerySet):
            raise TypeError(f"{type(self).__name__}.queryset must be a TenantScopedQuerySet")
        return rows

    # --- generic audited writes; views with business rules call service functions instead ---
    def tenant_for_create(self, serializer: serializers.BaseSerializer[Any]) -> Tenant:
        """Tenant users always create in their own tenant (a posted ``tenant`` is ignored);
        operators must name one."""
        principal = self.principal
        if not principal.sees_all_tenants:
            return Tenant.objects.get(pk=principal.own_tenant_id())
        tenant = serializer.validated_data.get("tenant")
        if tenant is None:
            raise Invalid("operators must say which tenant owns this", fields={"tenant": ["required"]})
        return tenant

    def perform_create(self, serializer: serializers.BaseSerializer[Any]) -> None:
        with transaction.atomic():
            instance = serializer.save(tenant=self.tenant_for_create(serializer))
            audit.record(self.actor, f"{self._audit_type()}.create", instance, after=audit.snapshot(instance))

    def perform_update(self, serializer: serializers.BaseSerializer[Any]) -> None:
        with transaction.atomic():
            before = audit.snapshot(cast(models.Model, serializer.instance))  # an update holds its row
            serializer.validated_data.pop("tenant", None)  # ownership never moves
            instance = serializer.save()
            audit.record(
                self.actor,
                f"{self._audit_type()}.update",
                instance,
                before=before,
                after=audit.snapshot(instance),
            )

    def perform_destroy(self, instance: Any) -> None:  # the row of whichever model the subclass serves
        with transaction.atomic():
            audit.record(
                self.actor,
                f"{self._audit_type()}.delete",
                instance,
                before=audit.snapshot(instance),
            )
            instance.delete()

    def _audit_type(self) -> str:
        return self.audit_object_type or self._all_rows().model._meta.model_name


class TenantScopedModelViewSet(TenantScopedMixin, viewsets.ModelViewSet):
    """Full CRUD on tenant-owned rows."""


class TenantScopedReadOnlyViewSet(TenantScopedMixin, viewsets.ReadOnlyModelViewSet):
    """List and retrieve tenant-owned rows."""


class TenantScopedCreateReadViewSet(
    TenantScopedMixin,
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Create, list and retrieve; other changes go through custom actions."""


class TenantField(serializers.PrimaryKeyRelatedField):
    """``tenant`` on tenant-owned serializers: shown to all, honoured only for operators."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("queryset", Tenant.objects.all())
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)


class SlugField(serializers.SlugRelatedField):
    """A related object named by its slug. A slug holding a NUL character names nothing (the
    database refuses NUL in text, so it is answered here as a 400, never sent to the query)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data.replace("\x00", "\\x00"))
        return super().to_internal_value(data)
