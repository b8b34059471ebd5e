"""A node's power page in Chromium: an operator powers a node off (graceful) from it, confirms,
and watches the state go from on to powering off to powered off as a real Celery worker drives
the node's Redfish BMC (OpenStack's sushy-emulator); the history table then holds both rows. An
auditor reads the same page without buttons; the occupancy map links the node to it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from console.power.models import PowerEvent
from scheduling.models import Node
from tests.power.conftest import attach_bmc, emulator_power, redfish  # noqa: F401
from tests.scheduling.conftest import make_fabric, make_pool

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def test_operator_powers_a_node_off_from_its_page_and_sees_it_off(
    page,
    live_server,
    login,
    worker,
    operator,
    attach_bmc,  # noqa: F811
    redfish,  # noqa: F811
):
    fabric = make_fabric("e2e-power", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    make_pool(fabric)
    node = Node.objects.filter(fabric=fabric).order_by("name").first()
    bmc = attach_bmc(node)
    assert emulator_power(redfish, bmc) == "On"
    login("op")
    # the occupancy map's cell of the node is the way to its power page
    page.goto(f"{live_server.url}/reservations/occupancy/")
    page.locator(f'[data-testid=occupancy-cell][data-node="{node.name}"]').click()
    expect(page).to_have_url(f"{live_server.url}/nodes/{node.pk}/power/")
    state = page.get_by_test_id("power-state")
    expect(state).to_have_attribute("data-state", "on")
    expect(page.get_by_test_id("bmc-address")).to_have_text(redfish.url)
    expect(page.get_by_test_id("power-on")).to_be_disabled()  # it is on already

    # when the operator asks for a graceful off, with a reason, and keeps it at first
    page.get_by_test_id("power-reason").fill("idle over the weekend")
    page.get_by_test_id("power-off").click()
    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog.get_by_role("heading")).to_have_text(f"Shut {node.name} down?")
    expect(dialog.get_by_test_id("confirm-text")).to_contain_text("links go down on purpose")
    dialog.get_by_test_id("confirm-keep").click()
    expect(dialog).to_have_count(0)
    assert Node.objects.get(pk=node.pk).power_state == "on"
    page.get_by_test_id("power-off").click()
    dialog.get_by_test_id("confirm-act").click()

    # then the page follows the node to off (the emulator applies the shutdown 1 to 11 s later)
    expect(state).to_have_attribute("data-state", re.compile("powering-off|off"), timeout=5_000)
    expect(state).to_have_attribute("data-state", "off", timeout=45_000)
    expect(page.get_by_test_id("power-label")).to_have_text("powered off")
    expect(page.get_by_test_id("power-since")).to_contain_text("UTC")
    assert emulator_power(redfish, bmc) == "Off"
    # and the history table, reloaded, shows the action and the BMC's answer, newest first
    rows = page.get_by_test_id("power-event")
    expect(rows).to_have_count(2, timeout=10_000)
    expect(rows.nth(0)).to_have_attribute("data-to", "off")
    expect(rows.nth(1)).to_have_attribute("data-to", "powering-off")
    expect(rows.nth(1)).to_contain_text("idle over the weekend")
    expect(page.get_by_test_id("power-on")).to_be_enabled()
    assert list(PowerEvent.objects.filter(node=node).values_list("to_state", "intended")) == [
        ("off", True),
        ("powering-off", True),
    ]


def test_auditor_reads_the_power_page_without_buttons(page, live_server, login, auditor):
    fabric = make_fabric("e2e-power-aud", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    node = Node.objects.filter(fabric=fabric).order_by("name").first()
    Node.objects.filter(pk=node.pk).update(power_state=Node.Power.FAILED)
    login("aud")
    response = page.goto(f"{live_server.url}/nodes/{node.pk}/power/")
    assert response is not None and response.status == 200
    expect(page.get_by_test_id("power-state")).to_have_attribute("data-state", "failed")
    expect(page.get_by_test_id("power-label")).to_have_text("power failed")
    expect(page.get_by_test_id("power-actions")).to_have_count(0)
    expect(page.get_by_test_id("power-off")).to_have_count(0)
