"""Log in as an operator and as a tenant, see the right navigation, log out."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def nav_keys(page) -> list[str]:
    return page.locator("[data-testid=nav] a").evaluate_all("els => els.map(e => e.dataset.nav)")


def test_operator_sees_operator_navigation_and_logs_out(login, operator, tenant_a, tenant_b, live_server):
    operator.username = "operator"  # the demo's name: the width the header must hold
    operator.save(update_fields=["username"])
    page = login("operator")
    expect(page.get_by_test_id("role")).to_have_text("operator")
    assert nav_keys(page) == [
        "home",
        "designer",
        "fabrics",
        "sites",
        "live",
        "tenants",
        "reservations",
        "usage",
        "audit",
        "notifications",
        "tokens",
        "api-docs",
    ]
    expect(page.get_by_test_id("tenant-count")).to_have_text("2")
    # the operator's navigation (the longest) stays on one line in a 1600-pixel window
    page.set_viewport_size({"width": 1600, "height": 1000})
    tops = page.locator("header.topbar a, header.topbar button, header.topbar input").evaluate_all(
        "els => els.map(e => e.getBoundingClientRect()).filter(r => r.height > 0).map(r => [r.top, r.bottom])"
    )
    centres = [(top + bottom) / 2 for top, bottom in tops]
    assert max(centres) - min(centres) < 12, f"navigation on several lines: {sorted(tops)}"
    font = page.get_by_test_id("logout").evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    height = page.get_by_test_id("logout").evaluate("e => e.getBoundingClientRect().height")
    assert height < 2 * font, "'Log out' wraps onto two lines"
    page.get_by_test_id("logout").click()
    page.wait_for_url(f"{live_server.url}/login/")
    page.goto(f"{live_server.url}/audit/")
    assert "/login/" in page.url  # the session is gone


def test_tenant_member_sees_tenant_navigation_only(login, member_a, live_server):
    page = login("member-a")
    expect(page.get_by_test_id("role")).to_have_text("tenant-member")
    expect(page.get_by_test_id("tenant-name")).to_have_text("Tenant A")
    assert nav_keys(page) == [
        "home",
        "live",
        "reservations",
        "datasets",
        "usage",
        "notifications",
        "tokens",
        "api-docs",
    ]
    response = page.goto(f"{live_server.url}/audit/")
    assert response.status == 404


def test_wrong_password_is_refused(page, live_server, operator):
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("op")
    page.get_by_label("Password").fill("wrong-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("Wrong username or password")


def test_token_page_shows_secret_once_and_audit_page_lists_it(login, admin_a, live_server):
    page = login("admin-a")
    page.goto(f"{live_server.url}/tokens/")
    page.get_by_label("Name").fill("laptop")
    page.get_by_role("button", name="Create token").click()
    secret = page.get_by_test_id("new-token").locator("code").inner_text()
    assert secret.startswith("ibc_")
    page.reload()
    assert secret not in page.content()
    page.goto(f"{live_server.url}/audit/")
    expect(page.get_by_test_id("audit-table")).to_contain_text("token.issue")
