"""End to end against the lab: real OpenSM on ibsim, the collector process, uvicorn (ASGI, for
the sockets), Redis, PostgreSQL and Debian's Chromium.

Unplug a cable in ibsim → within 5 s the operator's page shows the link down and the link-down
event; replug → it clears. A ready reservation (made through scheduling's services) shows
utilisation in its tenant's view, and nothing of the other tenant's.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from console.fabric.lab.faults import replug, unplug
from scheduling.services import inventory
from tests.fabric.conftest import requires_lab
from tests.live.helpers import ready_reservation
from tests.servers import login, processes, serve  # noqa: F401

pytestmark = [
    requires_lab,
    pytest.mark.lab,
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.django_db(transaction=True),
]


def test_unplugged_cable_shows_down_within_5s_and_clears_and_tenants_see_their_traffic(
    orm_beside_playwright,
    lab_fabric,
    processes,  # noqa: F811
    browser,
    operator,
    admin_a,
    admin_b,
    tenant_a,
    tenant_b,
):
    fabric, _lab = lab_fabric("live")
    inventory.import_inventory(fabric)
    res_a = ready_reservation(fabric, tenant_a, nodes=2)
    ready_reservation(fabric, tenant_b, nodes=2)
    url = serve(processes, fabric)

    op = login(browser, url, "op")
    op.goto(f"{url}/fabrics/{fabric.pk}/live/")
    expect(op.get_by_test_id("live-conn")).to_have_text("live", timeout=15_000)
    expect(op.get_by_test_id("live-summary")).to_contain_text("collector running", timeout=15_000)

    # the tenant's page: its reservation's links carry the traffic model's all-reduce
    tenant = login(browser, url, "admin-a")
    tenant.goto(f"{url}/live/")
    expect(tenant.get_by_test_id("live-title")).to_contain_text(fabric.name)
    # fabric change requests are the operators' (a tenant's card could never fill)
    expect(tenant.get_by_test_id("changes-panel")).to_have_count(0)
    expect(op.get_by_test_id("changes-panel")).to_be_visible()
    tenant.wait_for_function(
        "() => window.__live && [...window.__live.links.values()].some(l => l.util > 0.3)",
        timeout=20_000,
    )
    ids = tenant.evaluate("() => [...window.__live.links.keys()]")
    assert len(ids) == 16  # 2 nodes × 8 rails, nothing of tenant B's
    node = sorted(fabric.nodes.filter(pk__in=res_a.allocations.values("node")).values_list("name", flat=True))[0]
    leaf, leaf_port = fabric.nodes.get(name=node).hcas.values_list("leaf", "leaf_port").first()
    link = f"{leaf}/{leaf_port}"
    assert link in ids

    # when a cable of that reservation is pulled in ibsim
    started = time.monotonic()
    unplug(fabric, leaf, leaf_port)
    op.locator(f'[data-testid=down-link][data-link="{link}"]').wait_for(timeout=5_000)
    op.locator(f'[data-testid=event][data-kind=link_down][data-subject="{link}"]').wait_for(timeout=5_000)
    assert time.monotonic() - started < 5.0
    # the header counts it (it was written once, at load, and said "0 down" all along)
    expect(op.get_by_test_id("live-summary")).to_contain_text(" · 1 down · ", timeout=5_000)
    # the tenant sees it too, on its own link
    tenant.locator(f'[data-testid=down-link][data-link="{link}"]').wait_for(timeout=5_000)
    expect(tenant.get_by_test_id("live-summary")).to_contain_text("16 links of your reservations · 1 down")
    expect(tenant.locator(f'[data-testid=event][data-subject="{link}"]')).to_contain_text(
        res_a.name
    )  # its reservation, by name

    # when it is put back, the link is up again and the event resolves itself
    replug(fabric, leaf, leaf_port)
    expect(op.locator(f'[data-testid=down-link][data-link="{link}"]')).to_have_count(0, timeout=15_000)
    expect(op.get_by_test_id("live-summary")).to_contain_text(" · 0 down · ", timeout=5_000)
    expect(op.locator(f'[data-testid=event][data-subject="{link}"]')).to_have_attribute(
        "data-status", "resolved", timeout=15_000
    )
