"""The search box in the navigation, in Chromium: the operator finds a port GUID (as ibdiagnet
prints it), a LID, a P_Key (with the membership bit) and a reservation name; tenant B, typing the
same, finds nothing of tenant A's. No lab: the LID comes from a recorded discovery run."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from console.fabric.models import DiscoveryRun
from scheduling.models import HCA, ReservationAllocation
from tests.live import fabric_fixtures

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

world = fabric_fixtures.world


@pytest.fixture
def targets(world):
    res = world["res_a"]
    res.name = "llama-pretrain-7"
    res.save(update_fields=["name"])
    node = ReservationAllocation.objects.filter(reservation=res).first().node
    hca = HCA.objects.filter(node=node).order_by("index").first()
    DiscoveryRun.objects.create(
        fabric=world["fabric"],
        topology={"nodes": [{"name": node.name, "kind": "ca", "guid": hca.port_guid, "lids": {"1": 377}}]},
    )
    digits = hca.port_guid[2:]
    return {
        "node": node.name,
        "queries": {
            ":".join(digits[i : i + 2] for i in range(0, 16, 2)): node.name,
            "lid:377": node.name,
            f"{res.pkey | 0x8000:#06x}": "llama-pretrain-7",
            "llama-pre": "llama-pretrain-7",
        },
    }


def ask(page, q: str):
    box = page.get_by_test_id("nav-search")
    box.fill(q)
    box.press("Enter")
    page.wait_for_url("**/search/?q=*")
    return page


def test_the_operator_finds_them_and_the_other_tenant_does_not(targets, operator, member_b, login, live_server):
    page = login("op")
    for q, label in targets["queries"].items():
        ask(page, q)
        results = page.get_by_test_id("search-results")
        expect(results.get_by_role("link", name=label)).to_be_visible()
        expect(page.get_by_test_id("nav-search")).to_have_value(q)
    page.set_viewport_size({"width": 1600, "height": 1000})
    ask(page, "r1")  # switches, nodes and the reservation's tenant side by side
    page.screenshot(path="/tmp/search-operator-names.png", full_page=False)
    ask(page, next(iter(targets["queries"])))
    page.screenshot(path="/tmp/search-operator.png", full_page=True)
    results = page.get_by_test_id("search-results")
    results.get_by_role("link", name=targets["node"]).click()
    page.wait_for_url(f"{live_server.url}/fabrics/*/")

    page.get_by_test_id("logout").click()
    page = login("member-b")
    for q, label in targets["queries"].items():
        ask(page, q)
        expect(page.get_by_test_id("search-empty")).to_be_visible()
        assert label not in page.content()
    page.screenshot(path="/tmp/search-tenant-b.png", full_page=True)
