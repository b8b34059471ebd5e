"""The "powering on" step on a reservation card, in the browser.

No lab: a designed 1-SU fabric (32 DGX H100) with its inventory, every node powered off. Tenant A
asks for 16 GPUs as soon as possible; the queue pass places them on off nodes. The card shows the
step the API reports, follows the BMC's reports (``report_power``: the row and the power app's
signal, made here) as the page polls, and turns ready only after the nodes are on and the fabric's
verification (given by calling ``lifecycle.fabric_verified`` the way the pipeline does).
"""

from __future__ import annotations

import datetime as dt
import re
import uuid

import pytest
from playwright.sync_api import expect

from console.fabric.models import Fabric
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from designer.services import create_design
from scheduling.models import Node, Pool, Reservation
from scheduling.services import inventory, lifecycle, queue, quotas, snapshots
from scheduling.services.reservations import ReservationRequest
from tests.scheduling.conftest import report_power

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
ACTOR = Actor.system("e2e")
OPERATOR = Principal(None, Role.OPERATOR, None)


@pytest.fixture
def booting(tenant_a):
    uid = uuid.uuid4().hex[:6]
    _, revision = create_design(ACTOR, OPERATOR, name=f"e2e-power-{uid}", options=ONE_SU)
    fabric = Fabric.objects.create(name=f"e2e-power-{uid}", revision=revision)
    inventory.import_inventory(fabric)
    nodes = list(Node.objects.filter(fabric=fabric))
    pool = inventory.create_pool(ACTOR, OPERATOR, fabric=fabric, name="su1", kind=Pool.Kind.BY_SU, nodes=nodes)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    Node.objects.filter(fabric=fabric).update(power_state=Node.Power.OFF)
    snapshots.forget()
    a = Principal(None, Role.TENANT_ADMIN, tenant_a.pk)
    request = ReservationRequest(pool_id=pool.pk, gpus=16, name="a-boots", duration=dt.timedelta(hours=2))
    assert queue.reserve_asap(ACTOR, a, request).status == Reservation.Status.QUEUED
    queue.queue_pass(pool.pk)
    reservation = Reservation.objects.get(name="a-boots")
    assert reservation.status == Reservation.Status.PROVISIONING
    return reservation


def test_the_card_shows_powering_on_then_the_fabric_step_then_ready(page, live_server, login, admin_a, booting):
    reservation = booting
    node_ids = sorted(set(reservation.allocations.values_list("node_id", flat=True)))
    report_power(node_ids[0], Node.Power.POWERING_ON)
    login("admin-a")
    page.goto(f"{live_server.url}/reservations/")
    expect(page.locator("body[data-reservations=ready]")).to_be_attached()
    card = page.locator(f'[data-testid=reservation][data-id="{reservation.pk}"]')
    step = card.get_by_test_id("res-step")
    expect(step).to_have_attribute("data-step", "powering-on")
    expect(step).to_have_text(re.compile(r"^Powering on: 2 of 2 nodes off or booting, expected ready \d\d:\d\d UTC\.$"))
    page.screenshot(path="/tmp/power-card.png", full_page=True)

    # the BMC reports both nodes on: the card moves to the fabric's step, still provisioning
    for node_id in node_ids:
        report_power(node_id, Node.Power.ON)
    expect(step).to_have_attribute("data-step", "fabric", timeout=20_000)
    expect(card.get_by_test_id("res-status")).to_have_text("provisioning")

    # the pipeline verified its partition on the ports: ready, no step left
    lifecycle.fabric_verified(reservation.fabric_id, {reservation.pkey}, change_id=0)
    expect(card.get_by_test_id("res-status")).to_have_text("ready", timeout=20_000)
    expect(card.get_by_test_id("res-step")).to_have_count(0)
