"""Tenancy models and the one tenant-scoped base every tenant-owned model uses."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, ClassVar

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


class Role(models.TextChoices):
    OPERATOR = "operator", "Operator"
    TENANT_ADMIN = "tenant-admin", "Tenant admin"
    TENANT_MEMBER = "tenant-member", "Tenant member"
    AUDITOR = "auditor", "Auditor"


GLOBAL_ROLES = frozenset({Role.OPERATOR, Role.AUDITOR})
TENANT_ROLES = frozenset({Role.TENANT_ADMIN, Role.TENANT_MEMBER})


@dataclass(frozen=True)
class Principal:
    """What the scoping code needs to know about whoever is asking."""

    user_id: int | None
    role: str | None
    tenant_id: int | None
    read_only: bool = False

    @property
    def sees_all_tenants(self) -> bool:
        return self.role in GLOBAL_ROLES

    @property
    def is_operator(self) -> bool:
        return self.role == Role.OPERATOR

    @property
    def can_write(self) -> bool:
        return self.role is not None and self.role != Role.AUDITOR and not self.read_only

    def own_tenant_id(self) -> int:
        """The tenant of a tenant role, which the Membership constraint guarantees.

        Raises ``Tenant.DoesNotExist`` otherwise, as ``Tenant.objects.get(pk=None)`` would.
        """
        if self.tenant_id is None:
            raise Tenant.DoesNotExist("this principal belongs to no tenant")
        return self.tenant_id

    @classmethod
    def nobody(cls) -> Principal:
        return cls(None, None, None, True)

    @classmethod
    def of(cls, user: AbstractBaseUser | AnonymousUser | None, token: ApiToken | None = None) -> Principal:
        if user is None or not user.is_authenticated:
            return cls.nobody()
        membership = Membership.objects.filter(user_id=user.pk).only("role", "tenant_id").first()
        if membership is None:
            return cls(user.pk, None, None, True)
        read_only = bool(token is not None and token.read_only)
        return cls(user.pk, membership.role, membership.tenant_id, read_only)


class TenantScopedQuerySet(models.QuerySet):
    """The only way tenant-owned rows are read through the API and pages."""

    def visible_to(self, principal: Principal) -> TenantScopedQuerySet:
        if principal.role is None:
            return self.none()
        if principal.sees_all_tenants:
            return self.all()
        lookup = getattr(self.model, "tenant_lookup", "tenant")
        return self.filter(**{lookup: principal.tenant_id})


class TenantOwnedModel(models.Model):
    """Abstract base: a row that belongs to exactly one tenant."""

    tenant = models.ForeignKey("tenancy.Tenant", on_delete=models.PROTECT, related_name="+")

    tenant_lookup: ClassVar[str] = "tenant"
    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        abstract = True


class Tenant(models.Model):
    """An organisation that reserves GPUs and owns partitions on the fabric."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=50, unique=True)
    description = models.TextField(blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    tenant_lookup: ClassVar[str] = "pk"
    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's role; tenant roles carry a tenant, global roles (operator, auditor) none."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    tenant_lookup: ClassVar[str] = "tenant"
    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["user__username"]
        constraints = [
            models.CheckConstraint(
                name="membership_tenant_matches_role",
                condition=(
                    models.Q(role__in=["operator", "auditor"], tenant__isnull=True)
                    | models.Q(role__in=["tenant-admin", "tenant-member"], tenant__isnull=False)
                ),
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.role})"


TOKEN_PREFIX = "ibc"


def hash_token_secret(secret: str) -> str:
    # Tokens carry 256 random bits, so a fast hash is enough; salting adds nothing here.
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token for the API and CLI. Only its hash is stored; it is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    read_only = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    tenant_lookup: ClassVar[str] = "tenant"
    objects = TenantScopedQuerySet.as_manager()
    audit_exclude: ClassVar[frozenset[str]] = frozenset({"secret_hash"})

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"

    @staticmethod
    def mint() -> tuple[str, str, str]:
        """Return (prefix, secret, full token string)."""
        prefix = secrets.token_hex(4)
        secret = secrets.token_urlsafe(32)
        return prefix, secret, f"{TOKEN_PREFIX}_{prefix}_{secret}"

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()

    @property
    def status(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return "expired"
        return "active"

    def default_expiry(self) -> timedelta:
        return timedelta(days=settings.API_TOKEN_DEFAULT_DAYS)


class AuditEntry(models.Model):
    """One mutation: who, under which correlation id, on what, and the state before and after."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor_kind = models.CharField(max_length=10)
    actor_label = models.CharField(max_length=200)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_token = models.ForeignKey(ApiToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    correlation_id = models.CharField(max_length=64, db_index=True)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=50, db_index=True)
    object_type = models.CharField(max_length=100, db_index=True)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=200, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    tenant_lookup: ClassVar[str] = "tenant"
    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.actor_label} {self.action} {self.object_type}:{self.object_id}"


class IdempotencyKey(models.Model):
    """The first answer to a request sent with an ``Idempotency-Key`` header (console.tenancy.idempotency).

    Written in the same transaction as the request's own changes, so a stored key always has its
    answer and a crash leaves either both or neither. ``scope`` is the principal: one user's key
    never answers another user's (or tenant's) request.
    """

    scope = models.CharField(max_length=64)
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="sha256 of method, path and body")
    status_code = models.PositiveSmallIntegerField(default=0)
    body = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "key"], name="tenancy_idempotency_scope_key")]

    def __str__(self) -> str:
        return f"{self.scope} {self.key} → {self.status_code}"
