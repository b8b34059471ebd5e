"""Django's password validators on every password the console sets."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password

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
