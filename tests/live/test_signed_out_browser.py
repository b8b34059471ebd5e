"""The tenant's live page in Chromium against uvicorn: other tenants' hosts are not on its canvas,
and logging out in another tab of the same browser closes the page's socket ("signed out")."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.isolation import leaked
from tests.live.fabric_fixtures import statuses
from tests.servers import login, processes, web  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.django_db(transaction=True)]


def test_tenant_live_page_names_no_other_hosts_and_logout_closes_its_socket(
    orm_beside_playwright,
    world,
    lab_data_dir,
    processes,  # noqa: F811
    browser,
    admin_a,
    tmp_path,
):
    collector, fabric = world["collector"], world["fabric"]
    everything = statuses(collector)
    collector._publish(everything, 1.0)
    collector._snapshot(everything, 1.0, 0.1)
    hosts_b = set(world["res_b"].allocations.values_list("node__name", flat=True))
    url = web(processes)
    page = login(browser, url, "admin-a")
    page.goto(f"{url}/fabrics/{fabric.pk}/live/?level=pod")
    expect(page.get_by_test_id("live-conn")).to_have_text("live", timeout=15_000)
    assert leaked(page.content(), hosts_b) == []
    page.screenshot(path=str(tmp_path / "tenant-live.png"), full_page=True)

    # log out in a second tab of the same browser session
    other = page.context.new_page()
    other.goto(f"{url}/")
    other.get_by_role("button", name="Log out").click()
    expect(page.get_by_test_id("live-conn")).to_have_text("signed out: log in again", timeout=10_000)
    page.screenshot(path=str(tmp_path / "signed-out.png"), full_page=True)
