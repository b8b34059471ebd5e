"""Every HTML page of the console, and who sees it: the one list the accessibility test
(tests/e2e/test_accessibility.py) and the reviewers' screenshots (scripts/screenshots.py) walk.

A page's path has ``{holes}`` filled from the ids of the world the walk runs in (a test's fixtures
or the demo seed): ``fabric``, ``design``, ``revision``, ``reservation`` (one the tenant owns),
``change``, ``node`` (a node's power page) and ``q`` (a search). test_accessibility.py fails when
a URL pattern of an HTML page is in neither ``PAGES`` nor ``NOT_PAGES``, and when a role gets 200
from a page not listed for it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

ANONYMOUS, OPERATOR, TENANT_ADMIN, TENANT_MEMBER, AUDITOR = "anonymous", "operator", "admin", "member", "auditor"
ROLES = (ANONYMOUS, OPERATOR, TENANT_ADMIN, TENANT_MEMBER, AUDITOR)
SIGNED_IN = frozenset({OPERATOR, TENANT_ADMIN, TENANT_MEMBER, AUDITOR})
READERS = frozenset({OPERATOR, AUDITOR})  # who sees every tenant


@dataclass(frozen=True)
class Page:
    slug: str  # a file name: docs/screenshots/<account>/<slug>.png
    route: str  # the URL pattern, as tests/isolation.py's url_routes() spells it
    roles: frozenset[str]
    path: str = ""  # the URL to open, ``route`` when empty; ``{holes}`` filled by ``url()``
    ready: str = "main"  # a CSS selector present once the page has drawn itself
    status: int = 200
    action: str = ""  # a page reached by a form: "import" submits the designer's import form
    #: A part of the page that is the same for every role (a CSS selector): the accessibility walk
    #: checks it as the first role of ROLES that sees the page, and the rest of the page as every role.
    same_for_all: str = ""

    def url(self, ids: dict[str, object]) -> str:
        return (self.path or self.route).format(**ids)


_CANVAS = "body[data-canvas=ready]"
PAGES: tuple[Page, ...] = (
    Page("login", "/login/", frozenset({ANONYMOUS}), ready="form"),
    Page("not-found", "", frozenset(ROLES), path="/no-such-page/", status=404, ready="[data-testid=error-page]"),
    Page("home", "/", SIGNED_IN),
    Page("search", "/search/", SIGNED_IN, path="/search/?q={q}"),
    Page("fabrics", "/fabrics/", READERS),
    Page("sites", "/sites/", READERS),
    Page("datasets", "/datasets/", SIGNED_IN),
    Page("fabric", "/fabrics/{fabric_id}/", READERS, path="/fabrics/{fabric}/?discover=false"),
    Page("fabric-changes", "/fabrics/{fabric_id}/changes/", READERS, path="/fabrics/{fabric}/changes/"),
    Page(
        "fabric-change",
        "/fabrics/{fabric_id}/changes/{change_id}/",
        READERS,
        path="/fabrics/{fabric}/changes/{change}/",
    ),
    Page("fabric-ports", "/fabrics/{fabric_id}/ports/", READERS, path="/fabrics/{fabric}/ports/"),
    Page("fabric-events", "/fabrics/{fabric_id}/events/", READERS, path="/fabrics/{fabric}/events/"),
    Page("fabric-qos", "/fabrics/{fabric_id}/qos/", READERS, path="/fabrics/{fabric}/qos/"),
    Page("live-home", "/live/", SIGNED_IN),
    Page("live", "/fabrics/{fabric_id}/live/", SIGNED_IN, path="/fabrics/{fabric}/live/", ready="[data-testid=nav]"),
    Page("designer", "/designer/", READERS, ready="[data-testid=preview]"),
    Page("designer-canvas", "/designer/{design_id}/", READERS, path="/designer/{design}/", ready=_CANVAS),
    Page(
        "designer-revision",
        "/designer/{design_id}/r/{revision}/",
        READERS,
        path="/designer/{design}/r/{revision}/",
        ready=_CANVAS,
    ),
    Page("designer-import", "/designer/import/", frozenset({OPERATOR}), action="import"),
    Page("designer-import-job", "/designer/import/{job_id}/", READERS, path="/designer/import/{import_job}/"),
    Page("designer-imported", "/designer/{design_id}/imported/", READERS, path="/designer/{imported}/imported/"),
    Page("reservations", "/reservations/", SIGNED_IN),
    Page("reservation", "/reservations/{pk}/", SIGNED_IN, path="/reservations/{reservation}/"),
    Page("reservations-list", "/reservations/list/", SIGNED_IN),
    Page("reservation-use", "/reservations/{pk}/use/", SIGNED_IN, path="/reservations/{reservation}/use/"),
    Page("reservations-all", "/reservations/all/", READERS),
    Page("reservations-quotas", "/reservations/quotas/", READERS),
    Page("reservations-occupancy", "/reservations/occupancy/", READERS),
    Page("power-policy", "/reservations/power/", READERS),
    Page("power-policy-pool", "/reservations/power/{pk}/", READERS, path="/reservations/power/{pool}/"),
    Page("node-power", "/nodes/{node_id}/power/", READERS, path="/nodes/{node}/power/"),
    Page("usage", "/usage/", SIGNED_IN),
    Page("demo-webhook-sink", "/demo/webhook-sink/", READERS),
    Page("audit", "/audit/", frozenset({OPERATOR, AUDITOR, TENANT_ADMIN})),
    Page("tenants", "/tenants/", READERS),
    Page("locked-logins", "/logins/locked/", READERS),
    Page("tokens", "/tokens/", SIGNED_IN),
    Page("notifications", "/notifications/", SIGNED_IN),
    Page("password", "/account/password/", SIGNED_IN),
    # Swagger UI renders the one public schema whoever asks (SERVE_PUBLIC): 20 s of the walk per visit.
    Page(
        "api-docs",
        "/api/docs/",
        frozenset(ROLES),
        ready=".swagger-ui .information-container",
        same_for_all="#swagger-ui",
    ),
)

#: URL patterns that are not pages a person opens, and why.
NOT_PAGES: dict[str, str] = {
    "/logout/": "POST only; redirects to the login page",
    "/fabrics/{fabric_id}/validate/": "POST only; redirects to the fabric page, which follows the run",
    "/logins/locked/unlock/": "POST only; redirects to the locked-logins page",
    "/tokens/{pk}/revoke/": "POST only; redirects to the tokens page",
    "/notifications/webhooks/{pk}/test/": "POST only; redirects to the notifications page",
    "/notifications/webhooks/{pk}/delete/": "POST only; redirects to the notifications page",
    "/sites/{pk}/delete/": "POST only; redirects to the sites page",
    "/sites/links/{pk}/delete/": "POST only; redirects to the sites page",
    "/datasets/{pk}/delete/": "POST only; redirects to the datasets page",
    "/designer/canvas/": "POST only; answers JSON (the canvas of an unsaved design)",
    "/designer/{design_id}/node-types/": "POST only; redirects to the design's new revision",
    "/reservations/{pk}/connection/": "JSON for the reservation page's script",
    "/reservations/{pk}/use.env": "a text/plain download (the env file of the how-to-use page)",
    "/oidc/authenticate/": "redirects to the OpenID Connect provider (console.tenancy.oidc)",
    "/oidc/callback/": "the provider's redirect back: signs in and redirects home",
    "/oidc/logout/": "POST only; signs out and redirects",
    "/healthz": "JSON for load balancers",
    "/metrics": "Prometheus text",
}
#: The REST API answers JSON (DRF's browsable view of it is not a console page); its docs page is.
API_PREFIX = "/api/"
#: The UFM-compatible P_Key API (console/ufm) answers JSON only, whatever the Accept header.
UFM_PREFIXES = ("/ufmRest/", "/ufmRestV2/", "/ufm/{fabric}/ufmRest/")


def pages_for(role: str) -> list[Page]:
    return [page for page in PAGES if role in page.roles]


def checks_whole(page: Page, role: str) -> bool:
    """Whether the accessibility walk checks all of ``page`` as ``role`` (see ``same_for_all``)."""
    return not page.same_for_all or role == next(r for r in ROLES if r in page.roles)


def open_page(browser: Any, base: str, page: Page, ids: dict[str, object], *, ready: str = "") -> int:
    """Open ``page`` in the Playwright page ``browser`` (signed in already, or not) and wait until
    it has drawn itself (or ``ready`` is there); the HTTP status it answered."""
    if page.action == "import":
        design, revision = ids.get("import_design", ids["design"]), ids.get("import_revision", ids["revision"])
        export = f"{base}/api/designs/{design}/revisions/{revision}/export/ibnetdiscover/"
        dump = browser.request.get(export)
        assert dump.ok, (export, dump.status)
        browser.goto(f"{base}/designer/import/")
        browser.get_by_test_id("import-name").fill(f"imported-{uuid.uuid4().hex[:6]}")
        browser.get_by_test_id("import-dump").set_input_files(
            {"name": "fabric.ibnetdiscover", "mimeType": "text/plain", "buffer": dump.body()}
        )
        with browser.expect_navigation() as navigation:
            browser.get_by_test_id("import-submit").click()
        response = navigation.value
    else:
        response = browser.goto(base + page.url(ids))
    browser.locator(ready or page.ready).first.wait_for(state="attached")
    browser.wait_for_load_state("load")
    return response.status if response is not None else 0


def import_ids(revision_id: int) -> dict[str, int]:
    """An imported design (the design of ``revision_id`` exported and imported once, by name) and a
    large import's job still running: the ``{imported}`` and ``{import_job}`` holes."""
    from console.tenancy.context import Actor
    from console.tenancy.models import Principal, Role
    from designer import services
    from designer.exports import export
    from designer.models import Design, DesignRevision, ImportJob

    design = Design.objects.filter(name="walk-imported").first()
    if design is None:
        text = export(services.revision_graph(DesignRevision.objects.get(pk=revision_id)), "ibnetdiscover")[0]
        operator = Principal(None, Role.OPERATOR, None)
        design, _ = services.import_ibnetdiscover(Actor.system("walk"), operator, name="walk-imported", text=text)
    job = ImportJob.objects.filter(name="walk-large").first() or ImportJob.objects.create(
        name="walk-large",
        state="running",
        step="inferring tiers, rails and scalable units",
        percent=30,
        size_bytes=9_110_000,
    )
    return {"imported": design.pk, "import_job": job.pk}
