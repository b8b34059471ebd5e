"""Django's password validators on every password the console sets."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.test import Client

from console.demo import DEMO_ACCOUNTS, DEMO_PASSWORD
from console.tenancy.models import AuditEntry, Role

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("password", "reason"),
    [
        ("password1", "too common"),
        ("48213957601", "entirely numeric"),
        ("carol-the-member", "too similar to the username"),
        ("Xy7#", "at least 8 characters"),
    ],
)
def test_a_weak_password_is_refused_with_the_reason(admin_a, client_for, password, reason):
    client = client_for(admin_a)
    response = client.post(
        "/api/members/",
        {"username": "carol-the-member", "role": Role.TENANT_MEMBER, "password": password},
        format="json",
    )
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and "password" in body["fields"]
    assert reason.split()[-1] in " ".join(body["fields"]["password"]).lower()
    assert not get_user_model().objects.filter(username="carol-the-member").exists()
    assert not AuditEntry.objects.filter(action="member.create").exists()


def test_a_strong_password_is_accepted(admin_a, client_for):
    response = client_for(admin_a).post(
        "/api/members/",
        {"username": "carol", "role": Role.TENANT_MEMBER, "password": "plum-harbour-47-kites"},
        format="json",
    )
    assert response.status_code == 201, response.content


def test_the_demo_password_passes_the_validators():
    User = get_user_model()
    for account in DEMO_ACCOUNTS:
        validate_password(DEMO_PASSWORD, user=User(username=account.username))


def test_changing_ones_password_runs_the_validators_and_is_audited(member_a):
    client = Client()
    client.force_login(member_a)
    weak = client.post(
        "/account/password/",
        {"old_password": "pw-12345678", "new_password1": "12345678901", "new_password2": "12345678901"},
    )
    assert weak.status_code == 200 and "entirely numeric" in weak.content.decode()
    member_a.refresh_from_db()
    assert member_a.check_password("pw-12345678")

    strong = client.post(
        "/account/password/",
        {
            "old_password": "pw-12345678",
            "new_password1": "plum-harbour-47-kites",
            "new_password2": "plum-harbour-47-kites",
        },
    )
    assert strong.status_code == 302
    member_a.refresh_from_db()
    assert member_a.check_password("plum-harbour-47-kites")
    assert client.get("/").status_code == 200  # this session stays signed in
    entry = AuditEntry.objects.get(action="member.password_change")
    assert entry.actor_label == "member-a" and "plum" not in str(entry.after) + str(entry.before)
