"""Node power on the live canvas, in Chromium against uvicorn and Redis (no lab: the collector is
driven by the test). A node powered off on purpose: its host boxes count it, its links, once
down, are drawn grey and dotted (not the red dashes of a failure) and listed as down on purpose,
and the *Node power* card names it; when the node's power then fails, the same links are a
failure again. Every change arrives through the stream (``node.power``), no reload."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from console.power import services
from console.tenancy.context import Actor
from scheduling.models import Node, ReservationAllocation
from tests.live.fabric_fixtures import statuses

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.django_db(transaction=True)]
DESK = Actor.system("ops-desk")


def _edge_has(page, link: str, cls: str) -> bool:
    return page.evaluate(
        "([id, cls]) => window.__live.canvas.cy.getElementById(window.__live.edgeOfLink.get(id)).hasClass(cls)",
        [link, cls],
    )


def test_a_node_off_on_purpose_is_drawn_apart_from_a_failure_and_updates_live(operator_live_page, world):
    collector, fabric = world["collector"], world["fabric"]
    held = set(ReservationAllocation.objects.values_list("node_id", flat=True))
    node = Node.objects.filter(fabric=fabric).exclude(pk__in=held).order_by("name").first()
    services.set_bmc(node.pk, actor=DESK, data={"driver": "redfish", "address": "https://bmc.example"})
    links = sorted(collector.lm.links_of_nodes({node.name}))
    assert links
    page, _ = operator_live_page
    expect(page.get_by_test_id("power-none")).to_be_visible()
    box = page.evaluate("(id) => window.__live.edgeOfLink.get(id)", links[0]).split("--")
    box = next(end for end in box if end.startswith("hosts:"))

    # when an operator powers the node off (the state arrives over the socket)
    services.power_off(node.pk, actor=DESK, reason="idle", enqueue=False)
    row = page.locator(f'[data-testid=power-node][data-node="{node.name}"]')
    expect(row).to_have_attribute("data-state", "powering-off")
    expect(row).to_contain_text("powering off since")
    expect(row.get_by_role("link", name=node.name)).to_have_attribute("href", f"/nodes/{node.pk}/power/")
    label = page.evaluate("(b) => window.__live.canvas.cy.getElementById(b).data('label')", box)
    assert label.endswith("↓1 going off"), label
    # and its links go down: down on purpose, not a failure
    down = statuses(collector, down=set(links))
    collector._publish(down, 2.0)
    page.wait_for_function("(id) => window.__live.links.get(id)?.up === false", arg=links[0])
    assert _edge_has(page, links[0], "live-off") and not _edge_has(page, links[0], "live-down")
    item = page.locator(f'[data-testid=down-link][data-link="{links[0]}"]')
    expect(item).to_have_attribute("data-intended", "yes")
    expect(item).to_contain_text(f"{node.name} powering off (on purpose)")

    # when the node's power action is called failed, the same down links are a failure
    services.reap_stuck(now=timezone.now() + dt.timedelta(hours=2))
    expect(row).to_have_attribute("data-state", "failed")
    expect(row).to_contain_text("not intended")
    page.wait_for_function(
        "([id]) => window.__live.canvas.cy.getElementById(window.__live.edgeOfLink.get(id)).hasClass('live-down')",
        arg=[links[0]],
    )
    assert not _edge_has(page, links[0], "live-off")
    assert page.evaluate("(b) => window.__live.canvas.cy.getElementById(b).hasClass('pw-failed')", box)
    expect(item).to_have_attribute("data-intended", "no")
