"""The switch level of the live view in the browser: a switch's port table, updated live.

Against the lab (OpenSM on ibsim), the collector process, uvicorn (ASGI, for the sockets), Redis,
PostgreSQL and Debian's Chromium, as in tests/live/test_live_e2e.py. The operator clicks a leaf
on the canvas and gets its 64 ports with their peers; a tenant opens the same leaf and gets only
the ports of its own reservation. A cable of that reservation is pulled in ibsim: the row turns
Down on both pages (the same DOM row, rewritten in place by the stream's delta), its counters
and sparkline open from the row; put back, it turns Active again. Wheel-zooming into a leaf,
then into a spine, opens each one's table: the switch under the pointer, not the canvas's middle.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from console.fabric.lab.faults import replug, unplug
from scheduling.services import inventory
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import lab_data_dir, lab_fabric, su1_revision  # noqa: F401
from tests.live.helpers import ready_reservation
from tests.servers import login, processes, serve  # noqa: F401

pytestmark = [
    requires_lab,
    pytest.mark.lab,
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.django_db(transaction=True),
]
#: The collector sweeps every 0.5 s; a pulled cable reaches the page within a few sweeps.
LIVE_MS = 10_000
#: A cable put back is Active once OpenSM's next sweep brought the port up again.
REPLUG_MS = 30_000


def click_node(page, node_id: str) -> None:
    """A real mouse click on a canvas node, where Cytoscape drew it."""
    page.wait_for_function("(id) => window.__live?.canvas.cy.getElementById(id).length === 1", arg=node_id)
    at = page.evaluate("(id) => window.__live.canvas.cy.getElementById(id).renderedPosition()", node_id)
    box = page.get_by_test_id("live-canvas").bounding_box()
    page.mouse.click(box["x"] + at["x"], box["y"] + at["y"])


def zoom_into(page, node_id: str) -> None:
    """Wheel-zoom with the pointer on a canvas node until the canvas zooms no further or a port
    table opens (the table takes the place of part of the canvas, the pointer may be over it)."""
    canvas = page.get_by_test_id("live-canvas")
    canvas.scroll_into_view_if_needed()
    cy = "window.__live.canvas.cy"
    for _ in range(60):
        box = canvas.bounding_box()
        at = page.evaluate(f"(id) => {cy}.getElementById(id).renderedPosition()", node_id)
        page.mouse.move(box["x"] + at["x"], box["y"] + at["y"])
        page.mouse.wheel(0, -120)
        if page.evaluate(f"() => {cy}.zoom() >= {cy}.maxZoom()") or page.get_by_test_id("switch-panel").is_visible():
            return
    raise AssertionError(f"the canvas did not zoom into {node_id}")


def port_row(page, port: int):
    return page.get_by_test_id("switch-panel").locator(f'[data-testid=port-row][data-port="{port}"]')


def test_switch_port_table_shows_peers_and_follows_an_unplugged_cable_live(
    lab_fabric,  # noqa: F811
    processes,  # noqa: F811
    browser,
    operator,
    admin_a,
    tenant_a,
    tenant_b,
):
    fabric, _lab = lab_fabric("ports")
    inventory.import_inventory(fabric)
    res_a = ready_reservation(fabric, tenant_a, nodes=2)
    res_b = ready_reservation(fabric, tenant_b, nodes=2)
    nodes_a = set(fabric.nodes.filter(pk__in=res_a.allocations.values("node")).values_list("name", flat=True))
    nodes_b = set(fabric.nodes.filter(pk__in=res_b.allocations.values("node")).values_list("name", flat=True))
    node = sorted(nodes_a)[0]
    leaf, leaf_port = fabric.nodes.get(name=node).hcas.values_list("leaf", "leaf_port").first()
    link = f"{leaf}/{leaf_port}"
    url = serve(processes, fabric)

    # the operator clicks the leaf on the canvas: its port table, every port with its peer
    op = login(browser, url, "op")
    op.goto(f"{url}/fabrics/{fabric.pk}/live/")
    expect(op.get_by_test_id("live-conn")).to_have_text("live", timeout=15_000)
    expect(op.get_by_test_id("live-summary")).to_contain_text("collector running", timeout=15_000)
    click_node(op, leaf)
    panel = op.get_by_test_id("switch-panel")
    expect(panel).to_have_attribute("data-switch", leaf)
    expect(panel).to_have_attribute("data-state", "ready")
    expect(panel.get_by_test_id("switch-title")).to_have_text(f"Switch {leaf}")
    expect(panel.get_by_test_id("port-row")).to_have_count(64)
    row = port_row(op, leaf_port)
    expect(row).to_have_attribute("data-link", link)
    expect(row.get_by_test_id("port-peer")).to_have_text(re.compile(rf"^{node} port \d+$"))
    expect(row).to_have_attribute("data-state", "Active", timeout=LIVE_MS)
    expect(row).to_contain_text("4xNDR")
    uplink = port_row(op, 64)  # the upper half of a rail leaf goes to the spines
    expect(uplink.get_by_test_id("port-peer-switch")).to_have_text(re.compile(r"^spine-\d+$"))
    assert re.search(r"[?&]switch=", op.url), "the URL keeps the open switch"

    # tenant A opens the same leaf by its URL: only the ports of its own reservation
    tenant = login(browser, url, "admin-a")
    tenant.goto(f"{url}/fabrics/{fabric.pk}/live/?switch={leaf}")
    expect(tenant.get_by_test_id("live-conn")).to_have_text("live", timeout=15_000)
    mine = tenant.get_by_test_id("switch-panel")
    expect(mine).to_have_attribute("data-state", "ready", timeout=LIVE_MS)
    expect(mine.get_by_test_id("port-row")).to_have_count(2)  # 2 nodes, one HCA on this rail
    peers = mine.get_by_test_id("port-peer").all_inner_texts()
    assert {p.split(" port ")[0] for p in peers} == nodes_a
    assert not any(name in mine.inner_text() for name in nodes_b)
    tenant_row = port_row(tenant, leaf_port)
    expect(tenant_row).to_have_attribute("data-state", "Active", timeout=LIVE_MS)

    # the rows are rewritten in place: mark both DOM rows, they must survive the update
    for page in (op, tenant):
        page.evaluate(
            "(sel) => { document.querySelector(sel).dataset.mark = 'same-row'; }",
            f'[data-testid=switch-panel] [data-testid=port-row][data-port="{leaf_port}"]',
        )

    # when that cable is pulled in ibsim, its row shows Down on both pages
    unplug(fabric, leaf, leaf_port)
    for page in (op, tenant):
        row = port_row(page, leaf_port)
        expect(row).to_have_attribute("data-state", "Down", timeout=LIVE_MS)
        expect(row.get_by_test_id("port-state")).to_have_text("Down")
        expect(row).to_have_attribute("data-mark", "same-row")
    expect(port_row(op, 64)).not_to_have_attribute("data-state", "Down")

    # the row opens the link's counters, sparkline and history
    port_row(op, leaf_port).get_by_test_id("port-pick").click()
    detail = op.get_by_test_id("link-detail")
    expect(detail.locator("h3")).to_have_text(link)
    expect(detail).to_contain_text("Down")
    expect(detail.locator("svg.spark")).to_be_attached()
    expect(port_row(op, leaf_port)).to_have_attribute("aria-selected", "true")

    # put back, it is Active again
    replug(fabric, leaf, leaf_port)
    for page in (op, tenant):
        expect(port_row(page, leaf_port)).to_have_attribute("data-state", "Active", timeout=REPLUG_MS)
        expect(port_row(page, leaf_port)).to_have_attribute("data-mark", "same-row")

    # a spine carries none of the tenant's host links: a message, and no rows
    spine = uplink.get_by_test_id("port-peer-switch").inner_text()
    click_node(tenant, spine)
    expect(mine).to_have_attribute("data-switch", spine)
    expect(mine.get_by_test_id("switch-empty")).to_contain_text("None of your reservations")
    expect(mine.get_by_test_id("port-row")).to_have_count(0)
    # the operator follows the uplink to that spine from the leaf's table
    uplink.get_by_test_id("port-peer-switch").click()
    expect(panel).to_have_attribute("data-switch", spine)
    expect(panel.get_by_test_id("port-row").filter(has_text=leaf)).to_have_count(8)
    # closing the table leaves the switch level (and the URL no longer names the switch)
    panel.get_by_test_id("switch-close").click()
    expect(panel).to_be_hidden()
    assert "switch=" not in op.url

    # zooming into a switch opens its table too: the one under the pointer, once per zoom-in
    fit = "() => window.__live.canvas.cy.fit(undefined, 30)"
    for target, rows in ((leaf, 64), (spine, None)):
        op.evaluate(fit)
        zoom_into(op, target)
        expect(panel).to_have_attribute("data-switch", target)
        expect(panel).to_have_attribute("data-state", "ready")
        if rows:
            expect(panel.get_by_test_id("port-row")).to_have_count(rows)
        expect(op).to_have_url(re.compile(f"switch={re.escape(target)}"))
        panel.get_by_test_id("switch-close").click()
        expect(panel).to_be_hidden()
