"""Member rights: a tenant member changes only their own reservations, a tenant admin any of the
tenant's, everyone in the tenant reads them all; the audit says who acted."""

from __future__ import annotations

import datetime as dt

import pytest

from console.tenancy.models import AuditEntry, Role
from scheduling.services.rights import can_manage
from tests.scheduling.conftest import at, give_quota, tenant_principal

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(pool, tenant_a, admin_a, member_a, make_user, client_for):
    give_quota(tenant_a, pool, 64)
    other = make_user("member-a2", Role.TENANT_MEMBER, tenant_a)
    return {"admin": client_for(admin_a), "alice": client_for(member_a), "bob": client_for(other), "bob_user": other}


def _reserve(client, pool, **kw):
    body = {"pool": pool.pk, "gpus": 8, **(kw or {"duration_minutes": 60})}
    response = client.post("/api/reservations/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_member_reads_but_cannot_change_another_members_reservation(team, pool, member_a):
    mine = _reserve(team["alice"], pool)
    assert mine["created_by"] == member_a.pk  # what the cards use to hide the buttons
    bob = team["bob"]
    assert bob.get(f"/api/reservations/{mine['id']}/").status_code == 200
    assert mine["id"] in [r["id"] for r in bob.get("/api/reservations/").json()["results"]]
    end = dt.datetime.fromisoformat(mine["end"]) + dt.timedelta(hours=1)
    for verb, body in (("extend", {"end": end.isoformat()}), ("release", None), ("cancel", None)):
        response = bob.post(f"/api/reservations/{mine['id']}/{verb}/", body, format="json")
        assert response.status_code == 403, (verb, response.content)
        assert "tenant admin" in response.json()["detail"]
    assert bob.get(f"/api/reservations/{mine['id']}/").json()["status"] == mine["status"]
    assert not AuditEntry.objects.filter(action__in=["reservation.release", "reservation.cancel"]).exists()


def test_a_member_changes_their_own_and_an_admin_any_of_the_tenants(team, pool, member_a, admin_a):
    mine = _reserve(team["alice"], pool)
    released = team["alice"].post(f"/api/reservations/{mine['id']}/release/")
    assert released.status_code == 200 and released.json()["status"] == "ending"
    (entry,) = AuditEntry.objects.filter(action="reservation.release")
    assert entry.actor_user_id == member_a.pk and entry.object_id == str(mine["id"])

    bobs = _reserve(team["bob"], pool, start=at(5).isoformat(), end=at(6).isoformat())
    cancelled = team["admin"].post(f"/api/reservations/{bobs['id']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    (entry,) = AuditEntry.objects.filter(action="reservation.cancel")
    assert entry.actor_user_id == admin_a.pk and entry.actor_user_id != team["bob_user"].pk


def test_another_tenants_reservation_stays_404(team, pool, admin_b, client_for):
    mine = _reserve(team["alice"], pool)
    other = client_for(admin_b)
    assert other.post(f"/api/reservations/{mine['id']}/release/").status_code == 404


def test_the_service_rule_without_the_api(team, pool, tenant_a, member_a, admin_a):
    from scheduling.models import Reservation

    reservation = Reservation.objects.get(pk=_reserve(team["alice"], pool)["id"])
    admin = tenant_principal(tenant_a, Role.TENANT_ADMIN)
    member = tenant_principal(tenant_a, Role.TENANT_MEMBER)
    assert can_manage(admin, reservation)
    assert not can_manage(member, reservation)  # a member who did not make it
    assert reservation.created_by_id == member_a.pk
