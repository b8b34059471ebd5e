"""The "how to use it" page in the browser: reached from a card, its copy button puts the Slurm
hostlist on the clipboard; and a member's card offers no buttons on another member's reservation.

No lab: a designed 1-SU fabric with its inventory; reservations through scheduling's services.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid

import pytest
from playwright.sync_api import expect

from console.fabric.models import Fabric
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from designer.services import create_design
from scheduling.hostlist import expand
from scheduling.models import Node, Pool
from scheduling.services import inventory, quotas
from scheduling.services.reservations import ReservationRequest, reserve

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
ACTOR = Actor.system("e2e")
OPERATOR = Principal(None, Role.OPERATOR, None)


@pytest.fixture
def booked(tenant_a, member_a, make_user):
    """Two reservations of tenant A: one by member-a (16 GPUs), one by member-a2 (8 GPUs)."""
    uid = uuid.uuid4().hex[:6]
    _, revision = create_design(ACTOR, OPERATOR, name=f"e2e-use-{uid}", options=ONE_SU)
    fabric = Fabric.objects.create(name=f"e2e-use-{uid}", revision=revision)
    inventory.import_inventory(fabric)
    nodes = list(Node.objects.filter(fabric=fabric))
    pool = inventory.create_pool(ACTOR, OPERATOR, fabric=fabric, name="su1", kind=Pool.Kind.BY_SU, nodes=nodes)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    other = make_user("member-a2", Role.TENANT_MEMBER, tenant_a)
    mine, theirs = (
        reserve(
            ACTOR,
            Principal(user.pk, Role.TENANT_MEMBER, tenant_a.pk),
            ReservationRequest(pool_id=pool.pk, gpus=gpus, name=name, duration=dt.timedelta(hours=2)),
        )
        for user, gpus, name in ((member_a, 16, "a-mine"), (other, 8, "a-theirs"))
    )
    return mine, theirs


def test_the_card_links_the_guide_and_copy_puts_the_hostlist_on_the_clipboard(
    booked, login, live_server, page, context
):
    mine, theirs = booked
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    login("member-a")
    page.goto(f"{live_server.url}/reservations/")
    card = page.locator(f'[data-testid=reservation][data-id="{mine.pk}"]')
    expect(card.get_by_test_id("res-release")).to_be_visible()
    other = page.locator(f'[data-testid=reservation][data-id="{theirs.pk}"]')
    expect(other.get_by_test_id("res-not-yours")).to_be_visible()
    expect(other.get_by_test_id("res-release")).to_have_count(0)
    expect(other.get_by_test_id("res-cancel")).to_have_count(0)

    card.get_by_test_id("res-use-link").click()
    page.wait_for_url(f"{live_server.url}/reservations/{mine.pk}/use/")
    expect(page.get_by_test_id("use-not-verified")).to_be_visible()
    expect(page.locator("body[data-copy=ready]")).to_have_count(1)
    hostlist = page.get_by_test_id("use-hostlist").inner_text()
    assert sorted(expand(hostlist)) == sorted(mine.placement["nodes"])
    page.get_by_test_id("copy-hostlist").click()
    expect(page.get_by_test_id("copy-status")).to_have_text(f"Copied: {hostlist}")
    assert page.evaluate("navigator.clipboard.readText()") == hostlist
    page.get_by_test_id("copy-env").click()
    expect(page.get_by_test_id("copy-status")).to_contain_text("Copied: # reservation")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert f"IBC_HOSTLIST={hostlist}" in copied and "\nNCCL_IB_PKEY=" not in copied
    # the Kubernetes tenant's NetworkAttachmentDefinition, with the reservation's P_Key
    page.get_by_test_id("copy-nad").click()
    expect(page.get_by_test_id("copy-status")).to_contain_text("Copied: apiVersion: k8s.cni.cncf.io/v1")
    nad = page.evaluate("navigator.clipboard.readText()")
    assert "kind: NetworkAttachmentDefinition" in nad and f'"pkey": "0x{mine.pkey:04x}"' in nad
    # ib-kubernetes's configuration: its GUID pool is the reservation's own vGUID range
    expect(page.get_by_test_id("use-vguid-range")).to_contain_text("02:C0:FF:EE:")
    page.get_by_test_id("copy-ibk8s").click()
    expect(page.get_by_test_id("copy-status")).to_contain_text("Copied: apiVersion: v1")
    config = page.evaluate("navigator.clipboard.readText()")
    assert "GUID_POOL_RANGE_START" in config and "ib-kubernetes-ufm-secret" in config
    if os.environ.get("USAGE_GUIDE_SCREENSHOT"):
        page.screenshot(path=os.environ["USAGE_GUIDE_SCREENSHOT"], full_page=True)
