"""Bad input gets a 400 (or 413) with the one error body, never a 500: deep JSON, oversized
bodies, and times beyond the horizon (finding 2 and the year-9999 part of finding 10)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.test import override_settings
from django.utils import timezone

from scheduling.models import Reservation
from tests.scheduling.conftest import give_quota

pytestmark = pytest.mark.django_db

ERROR_KEYS = {"code", "detail", "fields"}


@pytest.fixture
def api(pool, tenant_a, admin_a, client_for):
    give_quota(tenant_a, pool, 64)
    return client_for(admin_a)


def post_raw(api, path: str, body: str):
    return api.generic("POST", path, body.encode(), content_type="application/json")


@pytest.mark.parametrize(
    "body",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"a":' * 5_000 + "1" + "}" * 5_000,
        '{"pool": 1, "gpus": 8, "constraints": ' + "[" * 40 + "]" * 40 + "}",
    ],
    ids=["100000-nested-arrays", "5000-nested-objects", "40-levels-inside-a-field"],
)
def test_deep_json_is_a_400_with_the_error_body(api, body):
    # when a deeply nested body is posted
    response = post_raw(api, "/api/reservations/", body)
    # then it is refused as input, in JSON, and nothing was reserved
    assert response.status_code == 400, response.content[:200]
    assert response["Content-Type"].startswith("application/json")
    payload = response.json()
    assert set(payload) == ERROR_KEYS
    assert payload["code"] == "parse_error" and "nested deeper than" in payload["detail"]
    assert not Reservation.objects.exists()


def test_ordinary_nesting_still_parses(api, pool):
    response = api.post(
        "/api/reservations/",
        {"pool": pool.pk, "gpus": 8, "duration_minutes": 60, "name": "shallow"},
        format="json",
    )
    assert response.status_code == 201, response.content


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024)
def test_a_body_over_the_size_limit_is_413(api, pool):
    body = json.dumps({"pool": pool.pk, "gpus": 8, "duration_minutes": 60, "name": "x" * 2000})
    response = post_raw(api, "/api/reservations/", body)
    assert response.status_code == 413
    assert response.json()["code"] == "too_large"
    assert not Reservation.objects.exists()


def test_malformed_json_is_a_400(api):
    response = post_raw(api, "/api/reservations/", '{"pool": NaN}')
    assert response.status_code == 400 and response.json()["code"] == "parse_error"


def far(days: float) -> str:
    return (timezone.now() + dt.timedelta(days=days)).isoformat()


@pytest.mark.parametrize(
    "window",
    [
        {"start": "9999-01-01T00:00:00Z", "duration_minutes": 60},
        {"start": "9999-12-31T22:00:00Z", "end": "9999-12-31T23:59:00Z"},
        {"start": far(400), "duration_minutes": 60},
    ],
    ids=["year-9999", "end-of-time", "400-days"],
)
def test_a_reservation_beyond_the_horizon_is_refused_with_a_clear_message(api, pool, window):
    response = api.post("/api/reservations/", {"pool": pool.pk, "gpus": 8, **window}, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and "days ahead" in body["detail"]
    assert body["fields"] == {"start": ["at most 365 days ahead"]}
    assert not Reservation.objects.exists()


def test_preview_and_availability_refuse_the_far_future_too(api, pool):
    preview = api.post(
        "/api/reservations/preview/",
        {"pool": pool.pk, "gpus": 8, "start": "9999-01-01T00:00:00Z", "duration_minutes": 60},
        format="json",
    )
    assert preview.status_code == 400 and "start" in preview.json()["fields"]
    availability = api.get(f"/api/pools/{pool.pk}/availability/", {"start": "9999-12-31T00:00:00Z"})
    assert availability.status_code == 400 and "start" in availability.json()["fields"]


@override_settings(CONSOLE_TIME_HORIZON_DAYS=30)
def test_the_horizon_is_a_setting_and_extend_respects_it(api, pool):
    ok = api.post("/api/reservations/", {"pool": pool.pk, "gpus": 8, "start": far(20), "duration_minutes": 60})
    assert ok.status_code == 201, ok.content
    refused = api.post("/api/reservations/", {"pool": pool.pk, "gpus": 8, "start": far(31), "duration_minutes": 60})
    assert refused.status_code == 400 and refused.json()["fields"] == {"start": ["at most 30 days ahead"]}
    extend = api.post(f"/api/reservations/{ok.json()['id']}/extend/", {"end": far(40)}, format="json")
    assert extend.status_code == 400 and extend.json()["fields"] == {"end": ["at most 30 days ahead"]}


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024)
def test_an_oversized_form_body_is_413_in_json_too(api, pool):
    response = api.post("/api/reservations/", {"pool": pool.pk, "gpus": 8, "name": "x" * 2000}, format="multipart")
    assert response.status_code == 413, response.content[:200]
    assert response.json()["code"] == "too_large"
