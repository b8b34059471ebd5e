"""The Content-Security-Policy in a real browser: the main pages load and work without a single
CSP violation (no inline script or style slipped in; Cytoscape's one style element is allowed by
hash; Swagger UI's split view needs no inline script)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from console.tenancy.context import Actor
from console.tenancy.models import Principal
from designer.services import create_design
from tests.scheduling.conftest import give_quota, make_fabric, make_pool

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "csp"

# Collected in the page before any of its own scripts run (Playwright's init scripts bypass CSP).
COLLECT = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} (${e.sourceFile}:${e.lineNumber})`);
});
"""


def test_main_pages_load_without_csp_violations(login, operator, live_server, page):
    design, _ = create_design(
        Actor.for_user(operator),
        Principal.of(operator),
        name="su1",
        options={"topology": "rail-optimized", "gpus": 256},
    )
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.add_init_script(COLLECT)
    SHOTS.mkdir(parents=True, exist_ok=True)

    def visit(path: str, ready: str | None = None) -> None:
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None
        assert "script-src 'self'" in response.headers["content-security-policy"]
        if ready:
            expect(page.locator(ready).first).to_be_attached()
        page.wait_for_load_state("networkidle")
        name = path.strip("/").replace("/", "_") or "home"
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
        violations = page.evaluate("window.__cspViolations")
        assert violations == [], f"{path}: {violations}"

    visit("/login/", 'input[name="username"]')
    login("op")
    visit("/", '[data-testid="nav"]')
    visit("/designer/", '[data-testid="preview"]')
    visit(f"/designer/{design.id}/", "body[data-canvas=ready]")
    visit("/reservations/", '[data-testid="nav"]')
    visit("/live/", '[data-testid="nav"]')
    visit("/logins/locked/", '[data-testid="no-locked-logins"]')
    visit("/no-such-page/", '[data-testid="error-page"]')
    visit("/api/docs/", ".swagger-ui .info")
    csp_errors = [m for m in console_errors if "Content Security Policy" in m]
    assert csp_errors == []


def test_tenant_and_live_pages_load_without_csp_violations(login, admin_a, tenant_a, live_server, page):
    # a tenant's reservations page draws its availability bars and the live page its legend with
    # style properties, which a strict policy allows only through the CSSOM
    fabric = make_fabric("csp-fabric", {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"})
    give_quota(tenant_a, make_pool(fabric, "csp-pool"), 32)
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.add_init_script(COLLECT)
    login("admin-a")
    page.goto(f"{live_server.url}/reservations/")
    bar = page.locator(".tl-bar").first
    expect(bar).to_be_attached()
    page.wait_for_load_state("networkidle")
    assert page.evaluate("window.__cspViolations") == []
    assert bar.evaluate("e => e.style.height").endswith("%")  # the style was applied, not dropped
    assert [m for m in console_errors if "Content Security Policy" in m] == []


def test_fabric_live_page_loads_without_csp_violations(login, operator, live_server, page):
    fabric = make_fabric("csp-live", {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"})
    page.add_init_script(COLLECT)
    login("op")
    page.goto(f"{live_server.url}/fabrics/{fabric.pk}/live/")
    swatch = page.locator('[data-testid="live-legend"] .swatch').first
    expect(swatch).to_be_attached()
    page.wait_for_load_state("networkidle")
    assert page.evaluate("window.__cspViolations") == []
    assert swatch.evaluate("e => e.style.getPropertyValue('--c')") != ""
