"""Self-service reservations in the browser, made real on a lab fabric.

A 1-SU rail-optimised design (32 DGX H100 under 8 rail leaves) runs as a lab (OpenSM on ibsim);
a Celery worker runs in this process, so ``fabric.reconcile`` pushes each reservation's
partition to the lab and the pipeline's verification makes it READY. Tenant A (admin-a, quota 24
guaranteed + 8 borrowable) reserves 16 GPUs through the form; tenant B cannot see it.
"""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

from console.fabric.lab.fabrics import start_lab, stop_lab
from console.fabric.models import ChangeRequest
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from designer.services import create_design
from scheduling.models import Node, Pool, Reservation
from scheduling.services import inventory, quotas
from tests.e2e.conftest import sign_in
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import with_agent

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.lab,
    requires_lab,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
ACTOR = Actor.system("e2e")
OPERATOR = Principal(None, Role.OPERATOR, None)
#: Reservations reach READY only after a real push and verification on the lab.
FABRIC_WAIT_MS = 150_000


@pytest.fixture
def su1_pool(tmp_path, tenant_a, tenant_b, lab_console):
    """The lab of a 1-SU design, its inventory, pool ``su1`` and both tenants' quotas."""
    uid = uuid.uuid4().hex[:6]
    _, revision = create_design(ACTOR, OPERATOR, name=f"e2e-su1-{uid}", options=ONE_SU)
    fabric, lab = start_lab(
        revision,
        name=f"e2e-su1-{uid}",
        actor=ACTOR,
        workdir=tmp_path / "lab",
        socket_name=f"e2e-res-{uid}",
    )
    try:
        with_agent(fabric, lab_console)
        inventory.import_inventory(fabric, actor=ACTOR)
        nodes = list(Node.objects.filter(fabric=fabric))
        pool = inventory.create_pool(ACTOR, OPERATOR, fabric=fabric, name="su1", kind=Pool.Kind.BY_SU, nodes=nodes)
        quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=24, borrow_limit_gpus=8)
        quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_b, pool=pool, guaranteed_gpus=64)
        yield pool
    finally:
        fabric.refresh_from_db()
        stop_lab(fabric)


def card_named(page, name: str):
    return page.get_by_test_id("reservation").filter(has_text=name)


def test_tenant_reserves_16_gpus_ready_on_the_lab_invisible_to_others_and_quota_enforced(
    page, browser, live_server, worker, su1_pool, admin_a, admin_b
):
    # given tenant A's admin on the reservations page
    sign_in(page, live_server.url, "admin-a")
    page.get_by_test_id("nav").get_by_role("link", name="Reservations").click()
    expect(page.locator("body[data-reservations=ready]")).to_be_attached()
    quota = page.get_by_test_id("quota-row").filter(has_text="su1")
    expect(quota.get_by_test_id("quota-guaranteed")).to_have_text("24")
    expect(quota.get_by_test_id("quota-used")).to_have_text("0")
    expect(page.get_by_test_id("timeline").filter(has_text="su1")).to_contain_text("256 GPUs")
    expect(page.get_by_test_id("timeline-free-now")).to_have_text("256")

    # when she asks for 16 GPUs now, the live preview shows where they would land
    page.get_by_test_id("res-name").fill("e2e-train")
    page.get_by_test_id("res-size").fill("16")
    page.get_by_test_id("res-duration").fill("2")
    expect(page.get_by_test_id("preview-state")).to_have_text("placeable")
    expect(page.get_by_test_id("preview-summary")).to_contain_text("16 GPUs on 2 nodes")
    expect(page.get_by_test_id("preview-groups")).not_to_be_empty()

    # then submitting places it, and it becomes ready once the lab verified its partition
    page.get_by_test_id("res-submit").click()
    card = card_named(page, "e2e-train")
    expect(card.get_by_test_id("res-status")).to_have_text(re.compile("placed|provisioning|ready"))
    expect(card.get_by_test_id("res-pkey")).to_have_text(re.compile(r"^0x[0-9a-f]{4}$"))
    expect(card.get_by_test_id("res-node-count")).to_have_text("2")
    expect(card.get_by_test_id("res-status")).to_have_text("ready", timeout=FABRIC_WAIT_MS)
    expect(card.get_by_test_id("conn-node")).to_have_count(2)
    expect(card.get_by_test_id("res-connection").locator("code.guid")).to_have_count(16)
    reservation = Reservation.objects.get(name="e2e-train")
    assert reservation.status == Reservation.Status.READY and reservation.ready_at is not None
    applied = ChangeRequest.objects.filter(fabric=reservation.fabric, status="applied")
    assert applied.exists(), "READY without an applied change on the lab"
    expect(card.get_by_test_id("res-pkey")).to_have_text(f"0x{reservation.pkey:04x}")
    expect(quota.get_by_test_id("quota-used")).to_have_text("16")

    # the detail page shows the same partition and the connection details
    card.get_by_test_id("res-link").click()
    page.wait_for_url(re.compile(rf"/reservations/{reservation.pk}/$"))
    detail = page.get_by_test_id("reservation-detail")
    expect(detail.get_by_test_id("res-status")).to_have_text("ready")
    expect(detail.get_by_test_id("conn-node")).to_have_count(2)
    detail_url = page.url

    # a second tenant sees neither the reservation in its list nor its page (404)
    other = browser.new_context().new_page()
    sign_in(other, live_server.url, "admin-b")
    other.goto(f"{live_server.url}/reservations/")
    expect(other.locator("body[data-reservations=ready]")).to_be_attached()
    expect(other.get_by_test_id("reservations-empty")).to_be_visible()
    expect(other.get_by_test_id("reservation")).to_have_count(0)
    assert other.goto(detail_url).status == 404
    assert other.request.get(f"{live_server.url}/api/reservations/{reservation.pk}/").status == 404
    other.context.close()

    # an over-quota request (16 held + 24 > 32) is refused in the preview, with the reason; Reserve
    # is disabled and what fits is offered instead (the 16 GPUs of headroom now, or the queue)
    page.goto(f"{live_server.url}/reservations/")
    page.get_by_test_id("res-name").fill("e2e-too-big")
    page.get_by_test_id("res-size").fill("24")
    expect(page.get_by_test_id("preview-state")).to_have_text("refused")
    expect(page.get_by_test_id("preview-rejection")).to_contain_text("over quota")
    expect(page.get_by_test_id("res-preview")).to_contain_text("headroom 16 GPUs")
    expect(page.get_by_test_id("res-submit")).to_be_disabled()
    expect(page.get_by_test_id("offer").filter(has_text="16 GPUs now")).to_be_visible()
    expect(page.locator("[data-testid=offer][data-kind=queue]")).to_have_count(1)
    assert not Reservation.objects.filter(name="e2e-too-big").exists()
    # the scheduler's reason, opened, stays open through an edit, and one click closes it
    reason = page.locator("details.res-exact", has_text="The scheduler's reason")
    reason.locator("summary").click()
    expect(reason).to_have_attribute("open", "")
    with page.expect_response("**/api/reservations/preview/"):
        page.get_by_test_id("res-name").fill("e2e-too-big-again")
    expect(page.get_by_test_id("preview-state")).to_have_text("refused")
    expect(reason).to_have_attribute("open", "")
    reason.locator("summary").click()
    expect(reason).not_to_have_attribute("open", "")

    # releasing removes the partition from the fabric: ending → released
    ready = card_named(page, "e2e-train")
    ready.get_by_test_id("res-release").click()
    page.get_by_test_id("confirm-act").click()
    expect(ready.get_by_test_id("res-status")).to_have_text("released", timeout=FABRIC_WAIT_MS)
    expect(quota.get_by_test_id("quota-used")).to_have_text("0")
