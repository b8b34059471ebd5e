"""Sign-in through a real OpenID Connect provider (panva's oidc-provider, frontend/tools/
oidc_provider.mjs, run with Node): the login page's button, the provider's own login and consent
pages, the authorization-code flow back to the console, and the groups claim mapped to a role
and a tenant (console.tenancy.oidc). A user whose groups map to nothing is sent back refused."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from console.tenancy.models import AuditEntry, Membership, Role, Tenant
from tests.servers import _free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
CLIENT_ID, CLIENT_SECRET = "ibconsole-test", "a-client-secret-for-the-test"
ACCOUNTS = {
    "alice": {"email": "alice@aurora.example", "groups": ["staff", "aurora-admins"]},
    "carol": {"email": "carol@example.org", "groups": ["ib-operators", "aurora-admins"]},
    "erin": {"email": "erin@example.org", "groups": ["staff"]},
}
ROLES = {"aurora-admins": "tenant-admin:aurora", "ib-operators": "operator"}


@pytest.fixture
def provider(live_server, settings, tmp_path):
    port = _free_port()
    log = (tmp_path / "oidc-provider.log").open("w")
    proc = subprocess.Popen(
        [
            "node",
            "tools/oidc_provider.mjs",
            str(port),
            CLIENT_ID,
            CLIENT_SECRET,
            f"{live_server.url}/oidc/callback/",
            json.dumps(ACCOUNTS),
        ],
        cwd=FRONTEND,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "NODE_ENV": "test"},
    )
    issuer = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while "ready" not in (tmp_path / "oidc-provider.log").read_text():
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "oidc-provider.log").read_text()
        time.sleep(0.1)
    Tenant.objects.create(name="Aurora Labs", slug="aurora")
    settings.CONSOLE_OIDC_CLIENT_ID = settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.CONSOLE_OIDC_NAME = "Example SSO"
    settings.CONSOLE_OIDC_ROLES = ROLES
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{issuer}/auth"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{issuer}/token"
    settings.OIDC_OP_USER_ENDPOINT = f"{issuer}/me"
    settings.OIDC_OP_JWKS_ENDPOINT = f"{issuer}/jwks"
    backends = list(settings.AUTHENTICATION_BACKENDS)
    settings.AUTHENTICATION_BACKENDS = [backends[0], "console.tenancy.oidc.OidcBackend", *backends[1:]]
    yield issuer
    proc.terminate()
    proc.wait(10)
    log.close()


def sign_in_at_the_provider(page, base: str, account: str) -> None:
    page.goto(f"{base}/login/")
    page.get_by_test_id("sso-login").click()
    page.locator("input[name=login]").fill(account)  # the provider's own login page
    page.locator("input[name=password]").fill("any")
    page.locator("button[type=submit]").click()
    page.locator("button[type=submit]").click()  # its consent page: Continue


def test_a_directory_user_signs_in_through_the_provider_with_the_role_of_their_groups(provider, page, live_server):
    base = live_server.url
    sign_in_at_the_provider(page, base, "alice")
    page.wait_for_url(f"{base}/")
    expect(page.locator("header")).to_contain_text("alice")
    row = Membership.objects.select_related("tenant").get(user__username="alice")
    assert (row.role, row.tenant.slug) == (Role.TENANT_ADMIN, "aurora")
    assert AuditEntry.objects.filter(
        action="member.create", actor_label="sso", object_repr__startswith="alice"
    ).exists()

    # the strongest of the groups wins; a user whose groups map to nothing is sent back refused
    page.context.clear_cookies()
    sign_in_at_the_provider(page, base, "carol")
    page.wait_for_url(f"{base}/")
    assert Membership.objects.get(user__username="carol").role == Role.OPERATOR
    page.context.clear_cookies()
    sign_in_at_the_provider(page, base, "erin")
    page.wait_for_url(f"{base}/login/?sso=refused")
    expect(page.get_by_test_id("sso-refused")).to_contain_text("no role in this console")
    assert not Membership.objects.filter(user__username="erin").exists()
