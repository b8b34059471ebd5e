"""API throttling: floods of random bearer tokens, of anonymous requests, of one token's and one
session's requests answer 429 with Retry-After and the one error body (code "throttled")."""

from __future__ import annotations

import secrets

import pytest
from django.core.cache import caches
from django.test import RequestFactory
from rest_framework.test import APIClient

from console.tenancy.models import ApiToken
from console.tenancy.throttling import client_address

pytestmark = pytest.mark.django_db


@pytest.fixture
def rates(settings):
    def set_rates(**rates: str) -> None:
        settings.CONSOLE_THROTTLE_RATES = {"anon": "", "session": "", "token": "", **rates}

    return set_rates


@pytest.fixture
def address():
    """A client address of its own (TEST-NET-2), with clean counters before and after."""
    ip = f"198.51.100.{secrets.randbelow(200) + 20}"
    caches["throttle"].delete(f"throttle_anon_{ip}")
    yield ip
    caches["throttle"].delete(f"throttle_anon_{ip}")


def _assert_throttled(response) -> None:
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    body = response.json()
    assert set(body) == {"code", "detail", "fields"} and body["code"] == "throttled"


def test_random_bearer_tokens_are_throttled(rates, address):
    rates(anon="20/minute")
    client = APIClient(REMOTE_ADDR=address)
    answers = []
    for _ in range(100):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer ibc_{secrets.token_hex(4)}_{secrets.token_urlsafe(24)}")
        answers.append(client.get("/api/me/"))
    assert [r.status_code for r in answers[:20]] == [401] * 20
    for response in answers[20:]:
        _assert_throttled(response)


def test_anonymous_floods_are_throttled(rates, address):
    rates(anon="10/minute")
    client = APIClient(REMOTE_ADDR=address)
    answers = [client.get("/api/reservations/") for _ in range(15)]
    assert [r.status_code for r in answers[:10]] == [401] * 10
    for response in answers[10:]:
        _assert_throttled(response)
    # another address still gets its answer
    assert APIClient(REMOTE_ADDR="203.0.113.9").get("/api/reservations/").status_code == 401


def test_a_client_cannot_dodge_the_limit_with_x_forwarded_for(rates, address):
    rates(anon="5/minute")
    client = APIClient(REMOTE_ADDR=address)
    answers = [client.get("/api/me/", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}") for i in range(8)]
    _assert_throttled(answers[-1])


def test_a_token_flood_is_throttled_per_token(rates, client_for, member_a, member_b):
    rates(token="5/minute")
    flooding, other = client_for(member_a), client_for(member_b)
    for token in ApiToken.objects.all():  # pks repeat across test databases; counters live in Redis
        caches["throttle"].delete(f"throttle_token_{token.pk}")
    answers = [flooding.get("/api/me/") for _ in range(7)]
    assert [r.status_code for r in answers[:5]] == [200] * 5
    _assert_throttled(answers[5])
    assert other.get("/api/me/").status_code == 200


def test_a_session_flood_is_throttled_per_user(rates, member_a):
    rates(session="5/minute")
    caches["throttle"].delete(f"throttle_session_{member_a.pk}")
    client = APIClient()
    client.force_login(member_a)
    answers = [client.get("/api/me/") for _ in range(6)]
    assert [r.status_code for r in answers[:5]] == [200] * 5
    _assert_throttled(answers[5])


def test_the_default_rates_leave_room_for_real_use(settings):
    # defaults from the environment: generous for people and scripts, not for guessing
    for scope in ("anon", "session", "token"):
        assert settings.CONSOLE_THROTTLE_RATES[scope]


def test_behind_a_trusted_proxy_the_address_is_the_one_the_proxy_wrote(settings):
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.4")
    assert client_address(request) == "10.0.0.2"  # no proxy trusted: the peer
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    assert client_address(request) == "203.0.113.4"  # not the client-written 6.6.6.6
