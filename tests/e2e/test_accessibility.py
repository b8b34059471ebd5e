"""axe-core (WCAG 2.0/2.1 A and AA) over every page of the console, as every role that sees it:
no violation of impact serious or critical.

The pages and who sees them are tests/e2e/pages.py, the list the reviewers' screenshots walk too.
It cannot fall behind the URL conf: a pattern of an HTML page missing from it fails here, and so
does a page that answers 200 to a role it does not list.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from scheduling.models import Node
from tests.e2e import axe
from tests.e2e.conftest import sign_in
from tests.e2e.pages import (
    ANONYMOUS,
    API_PREFIX,
    AUDITOR,
    NOT_PAGES,
    OPERATOR,
    PAGES,
    ROLES,
    TENANT_ADMIN,
    TENANT_MEMBER,
    UFM_PREFIXES,
    checks_whole,
    import_ids,
    open_page,
    pages_for,
)
from tests.fabric.test_change_list import new_change
from tests.isolation import url_routes
from tests.live.fabric_fixtures import world  # noqa: F401

#: The schema Swagger UI fetches and renders (api-docs' role-free part).
SCHEMA = re.compile(r"/api/schema/")

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

#: role → (the user fixture, its username)
USERS = {
    OPERATOR: ("operator", "op"),
    AUDITOR: ("auditor", "aud"),
    TENANT_ADMIN: ("admin_a", "admin-a"),
    TENANT_MEMBER: ("member_a", "member-a"),
}


@pytest.fixture
def ids(world):  # noqa: F811
    fabric = world["fabric"]
    change = new_change(fabric, "partition for the training run")
    return {
        "fabric": fabric.pk,
        "design": fabric.revision.design_id,
        "revision": fabric.revision.number,
        "reservation": world["res_a"].pk,  # one tenant A owns
        "change": change.pk,
        "pool": world["res_a"].pool_id,
        "node": Node.objects.filter(fabric=fabric).order_by("pk").values_list("pk", flat=True).first(),
        "q": world["res_a"].name,
        **import_ids(fabric.revision_id),
    }


def test_every_html_url_pattern_is_in_the_page_list():
    html = {
        route for route, _ in url_routes() if not route.startswith((API_PREFIX, *UFM_PREFIXES)) or route == "/api/docs/"
    }
    listed = {page.route for page in PAGES if page.route}
    missing = sorted(html - listed - set(NOT_PAGES))
    assert not missing, f"pages axe does not visit (add them to tests/e2e/pages.py): {missing}"
    stale = sorted((listed | set(NOT_PAGES)) - html)
    assert not stale, f"tests/e2e/pages.py lists patterns the URL conf no longer has: {stale}"
    assert len({page.slug for page in PAGES}) == len(PAGES)


def test_each_role_is_listed_for_exactly_the_pages_it_can_open(request, ids):
    for role in ROLES:
        client = Client()
        if role != ANONYMOUS:
            client.force_login(request.getfixturevalue(USERS[role][0]))
        for page in PAGES:
            if page.action:
                continue  # reached by a form; the browser test opens it
            # a listed page may redirect (/live/ to the fabric's); an unlisted one answers 404,
            # 403 or the login page's redirect
            status = client.get(page.url(ids), HTTP_ACCEPT="text/html", follow=role in page.roles).status_code
            if role in page.roles:
                assert status == page.status, (role, page.slug, status)
            else:
                assert status != 200, f"{page.slug} answers {role} 200: add {role} to its roles"


def test_axe_runs_under_the_strict_csp_and_catches_a_missing_label(page, live_server):
    response = page.goto(f"{live_server.url}/login/")
    assert response is not None and "script-src 'self'" in response.headers["content-security-policy"]
    assert axe.blocking(axe.violations(page)) == []
    assert page.evaluate("typeof window.axe.version") == "string"  # injected although the CSP refuses scripts
    # a field whose label is taken away: axe must say so, and as serious or worse
    page.evaluate(
        """() => { const input = document.querySelector('input[name=username]');
                   input.closest('label').replaceWith(input); }"""
    )
    found = axe.blocking(axe.violations(page))
    assert "label" in {v["id"] for v in found}, axe.describe("login without its label", found)
    # what a walk leaves out (pages.py, same_for_all) is left out, and only that
    assert "label" not in {v["id"] for v in axe.violations(page, exclude=("form",))}
    assert "label" in {v["id"] for v in axe.violations(page, exclude=("nav",))}


@pytest.mark.timeout(900)
def test_no_serious_or_critical_violation_on_any_page(
    request, subtests, browser, browser_context_args, live_server, ids
):
    # One world, one server, one browser for every role (a test per role built the world again:
    # a quarter of the walk); each role in its own context, so no session leaks between them.
    for role in ROLES:
        with subtests.test(role=role):
            context = browser.new_context(**browser_context_args, viewport={"width": 1600, "height": 1000})
            try:
                walk(context.new_page(), role, request, live_server.url, ids)
            finally:
                context.close()


def walk(page, role: str, request, base: str, ids: dict) -> None:
    """Every page ``role`` sees, axe on each: no serious or critical violation."""
    if role != ANONYMOUS:
        request.getfixturevalue(USERS[role][0])
        sign_in(page, base, USERS[role][1])
    failures, checked = [], 0
    for entry in pages_for(role):
        whole = checks_whole(entry, role)
        if not whole:
            # its role-free part is checked once (pages.py, same_for_all): this visit checks the
            # rest, and does not wait for the part it leaves out (nor fetches what it draws)
            page.route(SCHEMA, lambda route: route.abort())
        status = open_page(page, base, entry, ids, ready="" if whole else "main")
        assert status == entry.status, (entry.slug, status)
        found = axe.blocking(axe.violations(page, exclude=() if whole else (entry.same_for_all,)))
        if not whole:
            page.unroute(SCHEMA)
        checked += 1
        if found:
            failures.append(axe.describe(f"{role} {entry.slug} ({page.url})", found))
    assert checked == len(pages_for(role)) > 0
    assert not failures, "axe (WCAG 2.1 AA), serious or critical:\n" + "\n".join(failures)
