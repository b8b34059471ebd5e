"""The OpenAPI document tells the truth about errors: every operation declares the error
statuses the platform answers around it, with the one error body (finding 10)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

DOC = yaml.safe_load((Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml").read_text())
METHODS = {"get", "post", "put", "patch", "delete"}
ERROR_REF = "#/components/schemas/Error"


def operations():
    for path, item in DOC["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def resolve(response: dict) -> dict:
    ref = response.get("$ref")
    return DOC["components"]["responses"][ref.rsplit("/", 1)[1]] if ref else response


def allows_error_body(response: dict) -> bool:
    schema = resolve(response)["content"]["application/json"]["schema"]
    return schema.get("$ref") == ERROR_REF or {"$ref": ERROR_REF} in schema.get("anyOf", [])


def test_the_error_body_is_a_component():
    error = DOC["components"]["schemas"]["Error"]
    assert error["required"] == ["code", "detail", "fields"]


def test_every_operation_declares_the_errors_it_can_answer():
    missing = []
    for path, method, operation in operations():
        expected = {"400", "401", "403", "404", "429", "503"}
        if method != "get":
            expected.add("409")
        if "requestBody" in operation:
            expected |= {"413", "415"}
        for status in sorted(expected):
            response = operation["responses"].get(status)
            if response is None or not allows_error_body(response):
                missing.append(f"{method.upper()} {path} {status}")
    assert not missing, missing


def test_throttling_and_outages_say_when_to_retry():
    for status in ("429", "503"):
        assert "Retry-After" in DOC["components"]["responses"][f"Error{status}"]["headers"]


def test_idempotent_writes_declare_the_header_and_422():
    for path in (
        "/api/reservations/",
        "/api/reservations/{id}/extend/",
        "/api/reservations/{id}/release/",
        "/api/reservations/{id}/cancel/",
    ):
        operation = DOC["paths"][path]["post"]
        assert any(p["in"] == "header" and p["name"] == "Idempotency-Key" for p in operation["parameters"]), path
        assert allows_error_body(operation["responses"]["422"]), path


def test_a_refused_reservation_or_a_plain_conflict_are_both_declared_for_409():
    schema = DOC["paths"]["/api/reservations/"]["post"]["responses"]["409"]["content"]["application/json"]["schema"]
    assert {"$ref": "#/components/schemas/ReservationRefused"} in schema["anyOf"]
    assert {"$ref": ERROR_REF} in schema["anyOf"]


def test_nullable_fields_are_declared_nullable():
    reservation = DOC["components"]["schemas"]["Reservation"]["properties"]
    assert reservation["pkey_hex"].get("nullable") is True
    assert reservation["pkey"].get("nullable") is True


@pytest.mark.django_db
def test_a_body_in_a_media_type_the_operation_does_not_parse_is_the_documented_415(client, operator):
    """What schemathesis found: a write with a body DRF has no parser for answers 415, so every
    operation with a body declares it (and answers it with the one error body)."""
    client.force_login(operator)
    for content_type in ("text/plain", ""):
        response = client.post("/api/reservations/", data=b"pool=1", content_type=content_type)
        assert response.status_code == 415, (content_type, response.status_code)
        body = response.json()
        assert body["code"] == "unsupported_media_type" and set(body) == {"code", "detail", "fields"}
    operation = DOC["paths"]["/api/reservations/"]["post"]
    assert allows_error_body(operation["responses"]["415"])
