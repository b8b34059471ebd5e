"""In the browser: the auditor's pages show everything and offer no write; a token's revocation
asks first in the shared confirmation dialog (frontend/src/confirm.ts).

The reservations' release/cancel dialogs are driven in test_reservations_buttons.py and the
designer's disconnect dialog in test_designer.py.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.models import ApiToken, Principal
from tests.live.fabric_fixtures import world  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

#: data-testids of the write controls an operator sees on these pages.
WRITE_CONTROLS = ("reserve-form", "res-release", "res-cancel", "res-extend", "quota-save", "run-discovery")


def test_the_auditor_reads_the_operator_pages_with_no_write_control(page, live_server, login, auditor, world):  # noqa: F811
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_viewport_size({"width": 1600, "height": 1000})
    login("aud")
    base = live_server.url
    res_a, res_b = world["res_a"], world["res_b"]
    pages = {
        "/reservations/": "reservation",
        "/reservations/all/": "all-row",
        "/reservations/quotas/": "quota-row",
        "/reservations/occupancy/": None,
        f"/reservations/{res_b.pk}/": "reservation",
        f"/fabrics/{world['fabric'].pk}/?discover=false": None,
        "/tenants/": "tenant-table",
    }
    for path, content in pages.items():
        response = page.goto(base + path)
        assert response is not None and response.status == 200, path
        expect(page.get_by_test_id("nav").get_by_role("link", name="Reservations", exact=True)).to_be_visible()
        if content:
            expect(page.get_by_test_id(content).first).to_be_visible()
        for control in WRITE_CONTROLS:
            expect(page.get_by_test_id(control)).to_have_count(0)
        if path == "/reservations/all/":
            rows = page.get_by_test_id("all-row")
            expect(rows).to_have_count(2)
            expect(page.get_by_test_id("all-reservations")).to_contain_text(world["b"].name)
            page.screenshot(path="/tmp/auditor-all-reservations.png", full_page=True)
        if path == f"/reservations/{res_b.pk}/":
            expect(page.get_by_test_id("res-status")).to_have_text("ready")
            page.screenshot(path="/tmp/auditor-reservation.png", full_page=True)
    # a write attempted anyway (the API behind the buttons) is refused
    csrf = page.context.cookies()
    token = next(c["value"] for c in csrf if c["name"] == "csrftoken")
    refused = page.request.post(f"{base}/api/reservations/{res_a.pk}/release/", headers={"X-CSRFToken": token})
    assert refused.status == 403
    assert not errors, errors


def test_revoking_a_token_asks_first_and_keep_it_leaves_it(page, live_server, login, admin_a):
    token, _ = actions.issue_token(Actor.for_user(admin_a), Principal.of(admin_a), user=admin_a, name="ci-runner")
    login("admin-a")
    page.goto(f"{live_server.url}/tokens/")
    page.get_by_test_id("token-revoke").click()
    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog.get_by_role("heading")).to_have_text("Revoke token ci-runner?")
    expect(dialog.get_by_test_id("confirm-text")).to_contain_text("using ci-runner")
    expect(dialog.get_by_test_id("confirm-undo")).to_contain_text("cannot be restored")
    page.screenshot(path="/tmp/confirm-revoke.png")
    dialog.get_by_test_id("confirm-keep").click()
    expect(dialog).to_have_count(0)
    expect(page.get_by_test_id("token-revoke")).to_be_visible()
    assert ApiToken.objects.get(pk=token.pk).status == "active"

    page.get_by_test_id("token-revoke").click()
    page.get_by_test_id("confirm-act").click()
    expect(page.get_by_text("Token ci-runner revoked.")).to_be_visible()
    expect(page.get_by_test_id("token-revoke")).to_have_count(0)
    assert ApiToken.objects.get(pk=token.pk).status != "active"
