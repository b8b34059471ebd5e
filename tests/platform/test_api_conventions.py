"""API conventions: one error body, clear 4xx for bad input, pagination, schema snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

pytestmark = pytest.mark.django_db
SNAPSHOT = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"


@pytest.mark.smoke
def test_openapi_schema_matches_committed_snapshot(tmp_path):
    out = tmp_path / "openapi.yaml"
    call_command("spectacular", "--file", str(out), "--validate", "--fail-on-warn")
    current = yaml.safe_load(out.read_text())
    committed = yaml.safe_load(SNAPSHOT.read_text())
    assert current == committed, "API changed: run `make openapi` and commit docs/openapi.yaml"


def test_unknown_api_path_is_json_404(client):
    response = client.get("/api/no-such-thing/")
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "detail": "not found", "fields": {}}


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"name": ""},
        {"name": "x" * 500},
        {"name": None},
        {"name": ["a"]},
        {"is_active": "maybe"},
    ],
)
def test_bad_input_is_400_with_fields(operator, client_for, payload):
    response = client_for(operator).post("/api/tenants/", payload, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and body["fields"] and body["detail"]


def test_malformed_json_is_400(operator, client_for):
    response = client_for(operator).post("/api/tenants/", "{nope", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"


def test_duplicate_name_is_a_field_error(operator, client_for, tenant_a):
    response = client_for(operator).post("/api/tenants/", {"name": tenant_a.name}, format="json")
    assert response.status_code == 400
    assert "already exists" in response.json()["fields"]["name"][0]


def test_duplicate_slug_race_is_409(operator, client_for, tenant_a):
    # Passes field validation (other name) but collides on the unique slug in the database.
    response = client_for(operator).post("/api/tenants/", {"name": "Other", "slug": tenant_a.slug}, format="json")
    assert response.status_code in (400, 409)


def test_list_is_paginated(operator, client_for, tenant_a, tenant_b):
    body = client_for(operator).get("/api/tenants/", {"page_size": 1}).json()
    assert body["count"] == 2 and len(body["results"]) == 1 and body["next"]


@pytest.mark.parametrize(
    "query",
    [
        {"page": "abc"},
        {"page": 999},
        {"page_size": -1},
        {"ordering": "nonsense"},
        {"is_active": "perhaps"},
    ],
)
def test_bad_query_parameters_never_500(operator, client_for, query):
    response = client_for(operator).get("/api/tenants/", query)
    assert response.status_code in (200, 400, 404)


def test_auditor_cannot_write(auditor, client_for):
    response = client_for(auditor).post("/api/tenants/", {"name": "x"}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


def test_healthz(client):
    assert client.get("/healthz").json() == {"status": "ok"}
