"""Tenant isolation of every tenancy endpoint (see tests/isolation.py)."""

from __future__ import annotations

import pytest

from console.tenancy import actions
from console.tenancy.api import views
from console.tenancy.context import Actor
from console.tenancy.models import AuditEntry, Membership, Principal, Role
from tests.isolation import IsolationSuite

pytestmark = pytest.mark.django_db


class TestTenantIsolation(IsolationSuite):
    viewset = views.TenantViewSet
    basename = "tenant"
    filter_fields = ["slug", "is_active"]

    def make_object(self, tenant, user):
        return tenant

    def create_payload(self, other_tenant):
        return {"name": "Sneaky", "tenant": other_tenant.pk}


class TestMembershipIsolation(IsolationSuite):
    viewset = views.MembershipViewSet
    basename = "member"
    filter_fields = ["tenant", "role"]

    def make_object(self, tenant, user):
        return Membership.objects.get(user=user)

    def create_payload(self, other_tenant):
        return {
            "username": "planted",
            "role": Role.TENANT_MEMBER,
            "tenant": other_tenant.pk,
            "password": "pw-12345678",
        }

    def update_payload(self):
        return {"role": Role.TENANT_MEMBER}


class TestApiTokenIsolation(IsolationSuite):
    viewset = views.ApiTokenViewSet
    basename = "token"
    custom_actions = [("post", "revoke")]
    supports_update = False
    supports_delete = False
    filter_fields = ["tenant", "read_only"]

    def make_object(self, tenant, user):
        token, _ = actions.issue_token(Actor.for_user(user), Principal.of(user), user=user, name="iso")
        return token

    def create_payload(self, other_tenant):
        return {"name": "mine", "tenant": other_tenant.pk, "status": "revoked", "owner": 1}


class TestAuditIsolation(IsolationSuite):
    viewset = views.AuditEntryViewSet
    basename = "audit"
    supports_create = False
    supports_update = False
    supports_delete = False
    filter_fields = ["tenant", "correlation_id", "object_type"]

    def make_object(self, tenant, user):
        return AuditEntry.objects.create(
            actor_kind="system",
            actor_label="t",
            correlation_id="c",
            tenant=tenant,
            action="x",
            object_type="y",
        )
