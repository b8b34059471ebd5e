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
import threading
from types import SimpleNamespace

import pytest
from django.db import connection
from playwright.sync_api import expect

from console.fabric.lab.faults import replug, set_counters, unplug
from scheduling.models import Reservation
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


@pytest.fixture
def two_tenants(lab_fabric, processes, operator, admin_a, tenant_a, tenant_b):  # noqa: F811
    """Factory: a lab fabric with a ready 2-node reservation of each tenant (named, if names are
    given), the collector and the web server; the first host port of tenant A's reservation."""

    def start(name: str, names: tuple[str, str] | None = None) -> SimpleNamespace:
        fabric, _lab = lab_fabric(name)
        inventory.import_inventory(fabric)
        res_a = ready_reservation(fabric, tenant_a, nodes=2)
        res_b = ready_reservation(fabric, tenant_b, nodes=2)
        for res, label in zip((res_a, res_b), names or (), strict=False):
            Reservation.objects.filter(pk=res.pk).update(name=label)
        nodes_a = set(fabric.nodes.filter(pk__in=res_a.allocations.values("node")).values_list("name", flat=True))
        nodes_b = set(fabric.nodes.filter(pk__in=res_b.allocations.values("node")).values_list("name", flat=True))
        node = sorted(nodes_a)[0]
        leaf, leaf_port = fabric.nodes.get(name=node).hcas.values_list("leaf", "leaf_port").first()
        url = serve(processes, fabric)
        return SimpleNamespace(
            fabric=fabric, nodes_a=nodes_a, nodes_b=nodes_b, node=node, leaf=leaf, leaf_port=leaf_port, url=url
        )

    return start


def test_switch_port_table_shows_peers_and_follows_an_unplugged_cable_live(two_tenants, browser):
    lab = two_tenants("ports")
    fabric, nodes_a, nodes_b, node, url = lab.fabric, lab.nodes_a, lab.nodes_b, lab.node, lab.url
    leaf, leaf_port = lab.leaf, lab.leaf_port
    link = f"{leaf}/{leaf_port}"

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


def test_live_page_names_filters_states_its_colour_rule_and_shows_counters_set_in_ibsim(two_tenants, browser):
    """Filters by names (a tenant sees only its own), the legend's colour rule and units, the
    link charts' axes (unit and UTC time), and congestion and error counters set on a real ibsim
    port reaching the port table through the collector and the stream."""
    lab = two_tenants("counters", ("llama-pretrain", "bert-eval"))
    fabric, leaf, leaf_port, url = lab.fabric, lab.leaf, lab.leaf_port, lab.url

    op = login(browser, url, "op")
    op.goto(f"{url}/fabrics/{fabric.pk}/live/?switch={leaf}")
    expect(op.get_by_test_id("live-summary")).to_contain_text("collector running", timeout=15_000)
    expect(op.get_by_test_id("live-summary")).to_contain_text("busy (≥ 75 % utilisation)")
    # the filters name tenants and reservations, never their database ids
    options = op.get_by_test_id("filter-reservation").locator("option")
    expect(options.filter(has_text="llama-pretrain")).to_have_count(1)
    expect(options.filter(has_text="bert-eval")).to_have_count(1)
    expect(op.get_by_test_id("filter-reservation").locator("optgroup[label='Tenant A']")).to_have_count(1)
    texts = " ".join(options.all_inner_texts())
    assert not re.search(r"\b(tenant|reservation) \d+\b", texts), texts
    # the legend states the bundle rule, the scale with its unit, and what busy means
    legend = op.get_by_test_id("live-legend")
    expect(legend.get_by_test_id("legend-rule")).to_contain_text("mean utilisation")
    expect(legend.get_by_test_id("legend-rule")).to_contain_text("hottest link")
    expect(legend.get_by_test_id("legend-scale")).to_contain_text("% of line rate")
    expect(legend.get_by_test_id("legend-scale")).to_contain_text("≥ 90 %")
    expect(legend.get_by_test_id("legend-terms")).to_contain_text("busy = a link at ≥ 75 % utilisation")
    expect(legend.get_by_test_id("legend-terms")).to_contain_text("PortXmitWait")

    # tenant A's filter holds its own reservation's name and nothing of tenant B
    tenant = login(browser, url, "admin-a")
    tenant.goto(f"{url}/fabrics/{fabric.pk}/live/")
    expect(tenant.get_by_test_id("live-conn")).to_have_text("live", timeout=15_000)
    expect(tenant.get_by_test_id("legend-rule")).to_contain_text(
        "links a line stands for that belong to your reservations"
    )
    mine = tenant.get_by_test_id("filter-reservation")
    expect(mine.locator("option").filter(has_text="llama-pretrain")).to_have_count(1)
    assert "bert-eval" not in mine.inner_text() and "Tenant B" not in tenant.content()

    # congestion and errors on the reservation's port, set in ibsim: PortXmitWait keeps rising
    # (a congested port), the error counters are set once
    set_counters(
        fabric,
        leaf,
        leaf_port,
        {"SymbolErrorCounter": 12, "LinkErrorRecoveryCounter": 3, "LinkDownedCounter": 2, "PortRcvErrors": 5},
    )
    stop = threading.Event()

    def congest() -> None:
        ticks = 0
        try:
            while not stop.is_set():
                ticks += 20_000
                set_counters(fabric, leaf, leaf_port, {"PortXmitWait": ticks})
                stop.wait(0.25)
        finally:
            connection.close()

    driver = threading.Thread(target=congest, daemon=True)
    driver.start()
    try:
        for page in (op, tenant):
            if page is tenant:
                tenant.goto(f"{url}/fabrics/{fabric.pk}/live/?switch={leaf}")
            row = port_row(page, leaf_port)
            expect(row.get_by_test_id("port-errors")).to_contain_text("symbol 12", timeout=LIVE_MS)
            expect(row.get_by_test_id("port-errors")).to_contain_text("link recoveries 3")
            expect(row.get_by_test_id("port-errors")).to_contain_text("link downed 2")
            expect(row.get_by_test_id("port-errors")).to_contain_text("rcv errors 5")
            expect(row.get_by_test_id("port-xmit-wait")).to_have_text(re.compile(r"^[1-9][\d,]*/s$"), timeout=LIVE_MS)
        head = op.get_by_test_id("port-table").locator("thead")
        for unit in ("Tx (Gb/s)", "Util (%)", "Xmit wait (ticks/s)"):
            expect(head).to_contain_text(unit)
        # the snapshot the page resyncs from carries the same counters, read from ibsim (the
        # rate of a sweep that fell between two of the driver's writes is 0: polled, as the
        # page's rows are)
        op.wait_for_function(
            """([fabric, link]) => fetch(`/api/telemetry/fabrics/${fabric}/snapshot/`).then((r) => r.json())
                .then((body) => body.links.some((lk) => lk.id === link && lk.xmit_wait > 0
                    && lk.error_totals.LinkErrorRecoveryCounter === 3))""",
            arg=[fabric.pk, f"{leaf}/{leaf_port}"],
            timeout=LIVE_MS,
            polling=250,
        )
    finally:
        stop.set()
        driver.join()

    # the link's charts: y axis with its unit, x axis in 24-hour UTC
    port_row(op, leaf_port).get_by_test_id("port-pick").click()
    detail = op.get_by_test_id("link-detail")
    expect(detail).to_contain_text("xmit wait")
    spark = detail.locator("svg.spark")
    expect(spark).to_have_attribute("data-unit", "%")
    expect(spark.locator("[data-axis=y][data-at=max]")).to_have_text("100 %")
    expect(spark.locator("[data-axis=y][data-at=min]")).to_have_text("0 %")
    expect(spark.locator("[data-axis=x][data-at=max]")).to_have_text(
        re.compile(r"^([01]\d|2[0-3]):[0-5]\d:[0-5]\d UTC$")
    )
    history = detail.locator("svg.history")
    expect(history).to_have_attribute("data-unit", "Gb/s")
    expect(history.locator("[data-axis=x][data-at=min]")).to_have_text(re.compile(r" UTC$"))
