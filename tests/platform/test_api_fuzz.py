"""Schemathesis over the OpenAPI schema: generated requests to every operation, as an operator,
must never produce a server error (5xx)."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.models import Principal
from console.wsgi import application

# The committed snapshot (kept equal to the live schema by test_api_conventions) is loaded from
# disk, so importing this module makes no request; calls go to the WSGI app in-process.
schema = schemathesis.openapi.from_path(str(Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"))
schema.app = application


@pytest.fixture(autouse=True)
def _keep_test_connection():
    # Like Django's test client: the request must not close the test's database connection.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def operator_token(operator, tenant_a):
    _, plaintext = actions.issue_token(Actor.for_user(operator), Principal.of(operator), user=operator, name="fuzz")
    return plaintext


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_server_errors(case, operator_token):
    case.call_and_validate(headers={"Authorization": f"Bearer {operator_token}"}, checks=[not_a_server_error])
