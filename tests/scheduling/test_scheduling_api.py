"""The scheduling REST API: pools, availability, quotas, reservations and their isolation."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.tenancy.models import Role
from scheduling.api.views import QuotaViewSet, ReservationViewSet
from scheduling.models import Pool, Quota, Reservation
from tests.isolation import IsolationSuite
from tests.scheduling.conftest import at, give_quota, make_fabric, make_pool

pytestmark = pytest.mark.django_db


def shared_pool() -> Pool:
    pool = Pool.objects.filter(name="iso").first()
    if pool is None:
        fabric = make_fabric("iso-ft", {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"})
        pool = make_pool(fabric, "iso")
    return pool


def iso(value: dt.datetime) -> str:
    return value.isoformat()


@pytest.fixture
def api(pool, tenant_a, admin_a, client_for):
    give_quota(tenant_a, pool, 64)
    return client_for(admin_a)


@pytest.mark.smoke
def test_reserve_through_the_api_then_ready_after_verification(api, pool):
    response = api.post("/api/reservations/", {"pool": pool.pk, "gpus": 16, "duration_minutes": 60}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "provisioning" and body["gpus"] == 16
    assert body["pkey_hex"] == f"0x{body['pkey']:04x}" and body["partition"] == f"res-{body['id']}"
    from console.fabric.hooks import notify_verified

    notify_verified(pool.fabric_id, present_pkeys={body["pkey"]}, change_id=1)
    assert api.get(f"/api/reservations/{body['id']}/").json()["status"] == "ready"


def test_refusal_is_409_with_the_stored_reason(api, pool):
    response = api.post("/api/reservations/", {"pool": pool.pk, "gpus": 96, "duration_minutes": 60}, format="json")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "over_quota" and "limit of 64" in body["detail"]
    assert body["reservation"]["status"] == "rejected"


def test_preview_shows_placement_and_rejection_without_reserving(api, pool):
    ok = api.post(
        "/api/reservations/preview/",
        {"pool": pool.pk, "nodes": 4, "same_leaf": True, "duration_minutes": 60},
        format="json",
    )
    assert ok.status_code == 200 and ok.json()["placeable"]
    assert ok.json()["placement"]["leaf_groups"] == ["leaf-01"]
    too_big = api.post(
        "/api/reservations/preview/",
        {"pool": pool.pk, "nodes": 5, "same_leaf": True, "duration_minutes": 60},
        format="json",
    )
    rejection = too_big.json()["rejection"]
    assert not too_big.json()["placeable"] and rejection["reason"] == "too_large"
    assert "largest leaf group has only 4" in rejection["message"]
    assert not Reservation.objects.exists()


@pytest.mark.parametrize(
    "payload",
    [
        {"gpus": -8, "duration_minutes": 60},
        {"gpus": 0, "duration_minutes": 60},
        {"nodes": -1, "duration_minutes": 60},
        {"gpus": 8, "nodes": 1, "duration_minutes": 60},
        {"duration_minutes": 60},
        {"gpus": 8},
        {"gpus": 8, "duration_minutes": -5},
        {"gpus": "eight", "duration_minutes": 60},
        {"gpus": 8, "start": "yesterday", "duration_minutes": 60},
        {"gpus": 8, "start": "2020-01-01T00:00:00Z", "duration_minutes": 60},
        {"gpus": 8, "start": "2100-01-02T00:00:00Z", "end": "2100-01-01T00:00:00Z"},
        {"gpus": 8, "end": "2100-01-01T00:00:00Z", "duration_minutes": 60},
        {"gpus": 8, "duration_minutes": 60, "priority_class": "vip"},
        {"gpus": 8, "duration_minutes": 60, "max_switch_hops": -2},
    ],
)
def test_bad_input_is_400(api, pool, payload):
    for path in ("/api/reservations/", "/api/reservations/preview/"):
        response = api.post(path, {"pool": pool.pk, **payload}, format="json")
        assert response.status_code == 400, (path, payload, response.content)
        assert response.json()["code"] == "invalid"
    assert not Reservation.objects.exists()


def test_extend_release_and_cancel(api, pool):
    created = api.post("/api/reservations/", {"pool": pool.pk, "gpus": 8, "duration_minutes": 60}, format="json").json()
    new_end = dt.datetime.fromisoformat(created["end"]) + dt.timedelta(hours=1)
    extended = api.post(f"/api/reservations/{created['id']}/extend/", {"end": iso(new_end)}, format="json")
    assert extended.status_code == 200 and extended.json()["end"] == iso(new_end).replace("+00:00", "Z")
    bad = api.post(f"/api/reservations/{created['id']}/extend/", {"end": "soon"}, format="json")
    assert bad.status_code == 400
    released = api.post(f"/api/reservations/{created['id']}/release/")
    assert released.status_code == 200 and released.json()["status"] == "ending"
    again = api.post(f"/api/reservations/{created['id']}/release/")
    assert again.status_code == 409
    future = api.post(
        "/api/reservations/", {"pool": pool.pk, "gpus": 8, "start": iso(at(5)), "end": iso(at(6))}, format="json"
    ).json()
    assert future["status"] == "placed"
    cancelled = api.post(f"/api/reservations/{future['id']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


def test_quota_usage_and_headroom_visible_to_the_tenant(api, pool, tenant_a):
    api.post("/api/reservations/", {"pool": pool.pk, "gpus": 16, "duration_minutes": 60}, format="json")
    (quota,) = api.get("/api/quotas/").json()["results"]
    assert quota["tenant"] == tenant_a.pk
    assert quota["usage"]["used_gpus"] == 16 and quota["usage"]["headroom_gpus"] == 48


def test_operators_write_quotas_and_tenants_cannot(api, pool, operator, client_for, tenant_b):
    payload = {"tenant": tenant_b.pk, "pool": pool.pk, "guaranteed_gpus": 32}
    assert api.post("/api/quotas/", payload, format="json").status_code == 403
    op = client_for(operator)
    created = op.post("/api/quotas/", payload, format="json")
    assert created.status_code == 201, created.content
    too_much = op.patch(f"/api/quotas/{created.json()['id']}/", {"guaranteed_gpus": 100}, format="json")
    assert too_much.status_code == 409 and "the pool has 128" in too_much.json()["detail"]


def test_pools_and_availability(api, pool, operator, client_for):
    api.post("/api/reservations/", {"pool": pool.pk, "nodes": 2, "duration_minutes": 90}, format="json")
    listed = api.get("/api/pools/").json()["results"]
    assert [(p["name"], p["gpus"], p["node_count"]) for p in listed] == [("all", 128, 16)]
    start = timezone.now() + dt.timedelta(minutes=1)
    body = api.get(f"/api/pools/{pool.pk}/availability/", {"start": iso(start), "hours": 3, "step_minutes": 60}).json()
    assert [s["free_nodes"] for s in body["slots"]] == [14, 14, 16]
    assert body["slots"][0]["largest_free_leaf_group_nodes"] == 4
    assert api.get(f"/api/pools/{pool.pk}/availability/", {"step_minutes": 0}).status_code == 400
    # tenants cannot create pools; operators can, by SU or by name
    payload = {"fabric": pool.fabric_id, "name": "two", "kind": "manual", "node_names": ["node-001", "node-002"]}
    assert api.post("/api/pools/", payload, format="json").status_code == 403
    made = client_for(operator).post("/api/pools/", payload, format="json")
    assert made.status_code == 201 and made.json()["node_count"] == 2


class TestQuotaIsolation(IsolationSuite):
    viewset = QuotaViewSet
    basename = "quota"
    filter_fields = ["tenant", "pool"]

    def make_object(self, tenant, user):
        return give_quota(tenant, shared_pool(), 8)

    def create_payload(self, other_tenant):
        return {"tenant": other_tenant.pk, "pool": shared_pool().pk, "guaranteed_gpus": 8}

    def update_payload(self):
        return {"guaranteed_gpus": 16}


class TestReservationIsolation(IsolationSuite):
    viewset = ReservationViewSet
    basename = "reservation"
    custom_actions = [("post", "extend"), ("post", "release"), ("post", "cancel")]
    filter_fields = ["tenant", "pool", "status"]
    supports_update = False
    supports_delete = False
    tenant_role = Role.TENANT_MEMBER

    def make_object(self, tenant, user):
        from scheduling.services import reservations
        from tests.scheduling.conftest import SYSTEM, request_for, tenant_principal

        pool = shared_pool()
        if not Quota.objects.filter(tenant=tenant, pool=pool).exists():
            give_quota(tenant, pool, 16)
        return reservations.reserve(SYSTEM, tenant_principal(tenant), request_for(pool, gpus=8))

    def create_payload(self, other_tenant):
        return {
            "tenant": other_tenant.pk,
            "status": "ready",
            "owner": 1,
            "pool": shared_pool().pk,
            "gpus": 8,
            "duration_minutes": 30,
        }
