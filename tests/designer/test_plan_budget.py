"""Heavy design computations have a budget (issue 33, item 9): a 32x32x32 torus took 22 s of one
web process for any account. One request plans at most 65,536 endpoints and a torus of at most
8,192 switches (400 naming the limit; the CLI plans up to the design limits), a compare's rows
share that budget, a posted graph is held to it, and an account's plans are rate-limited
(CONSOLE_THROTTLE_PLAN, 429 with Retry-After)."""

from __future__ import annotations

import secrets

import pytest
from django.core.cache import caches

from console.tenancy.models import Role
from designer.builtin_catalogue import DEFAULT_CATALOGUE
from designer.errors import PlanError
from designer.options import MAX_SWITCHES, REQUEST_BUDGET, Budget, PlanOptions, resolve

pytestmark = pytest.mark.django_db

SU1 = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
TORUS_32 = {"topology": "torus", "dims": "32x32x32", "gpus": 32**3, "node_type": "DGX-H100", "switch": "QM9700"}


@pytest.fixture
def api(make_user, client_for, settings):
    settings.CONSOLE_THROTTLE_RATES = {"anon": "", "session": "", "token": "", "plan": ""}
    return client_for(make_user(f"planner-{secrets.token_hex(3)}", Role.OPERATOR))


def test_a_torus_over_the_budget_is_refused_naming_the_limit(api):
    response = api.post("/api/designs/plan/", TORUS_32, format="json")
    assert response.status_code == 400
    errors = " ".join(response.json()["fields"]["options"])
    assert "32,768 switches is more than one request plans (at most 8,192)" in errors
    assert "manage.py design plan" in errors
    # saving one is refused the same way, and nothing is saved
    saved = api.post("/api/designs/", {"name": "huge-torus", "options": TORUS_32}, format="json")
    assert saved.status_code == 400 and "at most 8,192" in saved.json()["detail"]
    assert api.get("/api/designs/").json()["count"] == 0


def test_a_fat_tree_over_the_endpoint_budget_is_refused(api):
    response = api.post("/api/designs/plan/", {**SU1, "topology": "fat-tree", "gpus": 131_072}, format="json")
    assert response.status_code == 400
    assert "131,072 endpoints is more than one request plans (at most 65,536)" in " ".join(
        response.json()["fields"]["options"]
    )


def test_the_cli_plans_up_to_the_design_limits():
    """Without a budget (the CLI, the operator's own machine) only the design limits apply."""
    resolved = resolve(PlanOptions.from_dict(TORUS_32), DEFAULT_CATALOGUE)
    assert resolved.options.dims == "32x32x32" and 32**3 <= MAX_SWITCHES
    with pytest.raises(PlanError, match="at most 8,192"):
        resolve(PlanOptions.from_dict(TORUS_32), DEFAULT_CATALOGUE, REQUEST_BUDGET)


def test_a_compares_rows_share_one_budget(api):
    big = {**SU1, "gpus": 16_384}  # 16,384 endpoints each: four fit, the fifth does not
    rows = api.post("/api/designs/compare/", {"options": [big] * 5}, format="json").json()["rows"]
    assert [bool(r["errors"]) for r in rows] == [False, False, False, False, True]
    assert "more than one request plans (at most 0)" in rows[4]["errors"][0]


def test_a_posted_graph_over_the_budget_is_refused(api, monkeypatch):
    graph = api.post("/api/designs/plan/", SU1, format="json")
    assert graph.status_code == 200
    made = api.post("/api/designs/", {"name": "su1", "options": SU1}, format="json").json()
    body = api.get(f"/api/designs/{made['id']}/revisions/1/graph/").json()
    monkeypatch.setattr("designer.api.views.REQUEST_BUDGET", Budget(endpoints=100, switches=REQUEST_BUDGET.switches))
    for url in ("/api/designs/validate/", f"/api/designs/{made['id']}/revisions/"):
        refused = api.post(url, {"graph": body}, format="json")
        assert refused.status_code == 400, refused.content
        assert refused.json()["code"] == "over_budget" and "at most 100" in refused.json()["detail"]


def test_an_accounts_plans_are_rate_limited(make_user, client_for, settings):
    settings.CONSOLE_THROTTLE_RATES = {"anon": "", "session": "", "token": "", "plan": "3/minute"}
    first = make_user(f"p1-{secrets.token_hex(3)}", Role.OPERATOR)
    other = make_user(f"p2-{secrets.token_hex(3)}", Role.OPERATOR)
    try:
        api, api2 = client_for(first), client_for(other)
        assert [api.post("/api/designs/plan/", SU1, format="json").status_code for _ in range(3)] == [200] * 3
        refused = api.post("/api/designs/compare/", {"options": [SU1]}, format="json")
        assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
        assert refused.json()["code"] == "throttled"
        assert api.get("/api/designs/").status_code == 200  # reading is not a plan
        assert api2.post("/api/designs/plan/", SU1, format="json").status_code == 200  # per account
    finally:
        caches["throttle"].clear()
