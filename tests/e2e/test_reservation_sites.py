"""The reserve form in a pool at two sites: "Near" and "May span sites" appear only for such a
pool, the preview says where the job goes and why, and Reserve places it near the chosen site.

No lab: two designed fat trees of 8 DGX H100 at sites A and B, one pool holding both, and a
single-site pool beside it. The page talks to the real REST API of a live server.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from console.fabric.models import Site, SiteLink
from scheduling.models import Dataset, Node, Reservation, ReservationAllocation
from tests.scheduling.conftest import give_quota, make_fabric, make_pool

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

SMALL = {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"}


@pytest.fixture
def two_sites(tenant_a, tenant_b):
    a = Site.objects.create(name="Site A", slug="site-a")
    b = Site.objects.create(name="Site B", slug="site-b")
    SiteLink.objects.create(a=a, b=b, kind="ib_router", latency_us=2000, bandwidth_gbps=100)
    fab_a = make_fabric("e2e-site-a", SMALL, site=a)
    fab_b = make_fabric("e2e-site-b", SMALL, site=b, pkey_min=0x2000, pkey_max=0x2FFF)
    both = make_pool(fab_a, "a-both", list(Node.objects.filter(fabric__in=[fab_a, fab_b])))
    local = make_fabric("e2e-local", SMALL)
    single = make_pool(local, "b-single")
    give_quota(tenant_a, both, 64)
    give_quota(tenant_a, single, 32)
    Dataset.objects.create(tenant=tenant_a, name="corpus", site=b)
    Dataset.objects.create(tenant=tenant_b, name="secret-genomes", site=b)
    return both, single


def test_near_a_dataset_from_the_form_lands_at_its_site(page, live_server, login, admin_a, two_sites):
    both, single = two_sites
    page.set_viewport_size({"width": 1600, "height": 1000})
    login("admin-a")
    page.goto(f"{live_server.url}/reservations/")
    expect(page.locator("body[data-reservations=ready]")).to_be_attached()
    page.get_by_test_id("res-advanced").locator("summary").click()
    # a single-site pool shows no site controls; the two-site pool does
    page.get_by_test_id("res-pool").select_option(str(single.pk))
    expect(page.get_by_test_id("res-sites")).to_be_hidden()
    page.get_by_test_id("res-pool").select_option(str(both.pk))
    expect(page.get_by_test_id("res-sites")).to_be_visible()
    near = page.get_by_test_id("res-near")
    expect(near.locator("option")).to_have_text(
        ["anywhere (the site that can place it soonest)", "Site A", "Site B", "corpus (at Site B)"]
    )
    near.select_option("dataset:corpus")
    expect(page.get_by_test_id("preview-site")).to_have_text("near site-b: site-b has room now, so it runs at site-b")
    page.get_by_test_id("res-submit").click()
    expect(page.get_by_test_id("reservation")).to_have_count(1)
    reservation = Reservation.objects.get()
    nodes = ReservationAllocation.objects.filter(reservation=reservation).values_list("node__fabric__name", flat=True)
    assert set(nodes) == {"e2e-site-b"}
    assert reservation.near_dataset.name == "corpus"
