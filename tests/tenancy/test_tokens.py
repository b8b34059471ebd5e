"""API tokens: hashed at rest, shown once, expiry, read-only scope, revocation on next request."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from console.tenancy.models import ApiToken, hash_token_secret

pytestmark = pytest.mark.django_db


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.mark.smoke
def test_token_is_shown_once_and_stored_hashed(member_a):
    client = APIClient()
    client.force_login(member_a)
    response = client.post("/api/tokens/", {"name": "ci"}, format="json")
    assert response.status_code == 201, response.content
    plaintext = response.json()["token"]
    row = ApiToken.objects.get(pk=response.json()["id"])
    assert plaintext not in row.secret_hash and row.secret_hash == hash_token_secret(plaintext.split("_", 2)[2])
    listed = client.get(f"/api/tokens/{row.pk}/").json()
    assert "token" not in listed and "secret_hash" not in listed
    assert bearer(plaintext).get("/api/me/").json()["username"] == "member-a"


def test_session_post_without_csrf_is_refused(member_a, session_client_for):
    client = session_client_for(member_a)
    response = client.post("/api/tokens/", {"name": "x"}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_revoked_token_fails_on_next_request(member_a, client_for):
    client = client_for(member_a)
    token_id = client.get("/api/tokens/").json()["results"][0]["id"]
    assert client.post(f"/api/tokens/{token_id}/revoke/").status_code == 200
    response = client.get("/api/me/")
    assert response.status_code == 401
    assert response.json()["code"] == "token_revoked"


def test_expired_token_is_refused(member_a, client_for):
    client = client_for(member_a)
    ApiToken.objects.filter(user=member_a).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    response = client.get("/api/me/")
    assert response.status_code == 401
    assert response.json()["code"] == "token_expired"


@pytest.mark.parametrize("header", ["Bearer nonsense", "Bearer ibc_dead_beef", "Bearer "])
def test_bad_tokens_get_401_not_500(db, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/me/")
    assert response.status_code == 401
    assert set(response.json()) == {"code", "detail", "fields"}


def test_read_only_token_reads_but_cannot_write(operator, client_for):
    client = client_for(operator, read_only=True)
    assert client.get("/api/tenants/").status_code == 200
    response = client.post("/api/tenants/", {"name": "Nope"}, format="json")
    assert response.status_code == 403
    assert "read-only" in response.json()["detail"]


def test_expiry_bounds_are_validated(member_a, client_for):
    client = client_for(member_a)
    response = client.post("/api/tokens/", {"name": "x", "expires_in_days": 0}, format="json")
    assert response.status_code == 400
    assert "expires_in_days" in response.json()["fields"]


def test_auditor_tokens_are_always_read_only(auditor, client_for):
    client = client_for(auditor)
    response = client.post("/api/tokens/", {"name": "x"}, format="json")
    # Auditors cannot write at all, creating a token included: they receive one from the UI.
    assert response.status_code == 403


def test_members_see_only_their_own_tokens(admin_a, member_a, client_for):
    admin = client_for(admin_a)
    member = client_for(member_a)
    member_ids = {t["id"] for t in member.get("/api/tokens/").json()["results"]}
    admin_ids = {t["id"] for t in admin.get("/api/tokens/").json()["results"]}
    assert member_ids < admin_ids  # the admin sees the member's token and their own
    admin_token = (admin_ids - member_ids).pop()
    assert member.get(f"/api/tokens/{admin_token}/").status_code == 404
