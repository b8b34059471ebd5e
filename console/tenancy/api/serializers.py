"""Serializers for the tenancy endpoints. Ownership and status fields are always read-only."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from rest_framework import serializers

from console.tenancy.models import ApiToken, AuditEntry, Membership, Role, Tenant

User = get_user_model()


class TenantSerializer(serializers.ModelSerializer):
    slug = serializers.SlugField(max_length=50, required=False, allow_blank=True)

    class Meta:
        model = Tenant
        fields = ["id", "name", "slug", "description", "is_active", "created_at"]
        read_only_fields = ["id", "created_at"]


class MembershipSerializer(serializers.ModelSerializer):
    username = serializers.RegexField(r"^[\w.@+-]{1,150}$", source="user.username")
    email = serializers.EmailField(source="user.email", required=False, allow_blank=True)
    password = serializers.CharField(write_only=True, required=False, min_length=8, max_length=128)
    role = serializers.ChoiceField(choices=Role.choices)
    tenant = serializers.PrimaryKeyRelatedField(queryset=Tenant.objects.all(), required=False, allow_null=True)

    class Meta:
        model = Membership
        fields = ["id", "username", "email", "password", "role", "tenant", "created_at"]
        read_only_fields = ["id", "created_at"]


class MembershipUpdateSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices)


class ApiTokenSerializer(serializers.ModelSerializer):
    status = serializers.CharField(read_only=True)
    user = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "prefix",
            "user",
            "tenant",
            "read_only",
            "status",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
        ]
        read_only_fields = fields


class ApiTokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    expires_in_days = serializers.IntegerField(required=False, min_value=1, max_value=366)
    # The serializer metaclass pops declared fields, so this field does not shadow `Field.read_only`.
    read_only = serializers.BooleanField(required=False, default=False)  # type: ignore[assignment]


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
        read_only_fields = fields


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = [
            "id",
            "created_at",
            "actor_kind",
            "actor_label",
            "actor_user",
            "actor_token",
            "correlation_id",
            "tenant",
            "action",
            "object_type",
            "object_id",
            "object_repr",
            "before",
            "after",
        ]
        read_only_fields = fields


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.CharField(allow_null=True)
    tenant = TenantSerializer(allow_null=True)
    read_only = serializers.BooleanField()  # type: ignore[assignment]  # popped by the metaclass, as above
