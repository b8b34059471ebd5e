"""An intended power-off is not a failure: the links of a node powered off (or powering off) by an
operator raise no link-down alarm, while the same links going down on a node that is on, or whose
power action failed, do."""

from __future__ import annotations

import pytest

from console.power import services
from console.telemetry.alarms import AlarmEngine
from console.telemetry.core import LinkStatus
from console.telemetry.linkmap import build_link_map
from console.telemetry.power import powered_off_links
from designer.services import revision_graph
from scheduling.models import Node
from tests.power.conftest import SYSTEM_ACTOR
from tests.scheduling.conftest import make_fabric

pytestmark = pytest.mark.django_db


def _down_alarms(engine: AlarmEngine, statuses, fabric, lm) -> set[str]:
    transitions = engine.links(statuses, powered_off_links(fabric.pk, lm))
    return {t.subject for t in transitions if t.action == "open" and t.kind == "link_down"}


def test_intended_power_off_raises_no_link_down_alarm_but_a_failure_does(attach_bmc):
    fabric = make_fabric("alarm", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    lm = build_link_map(revision_graph(fabric.revision))
    switched_off, failed, broken = Node.objects.filter(fabric=fabric).order_by("pk")[:3]
    # given one node powered off by an operator, one whose power action failed, one still on
    attach_bmc(switched_off)
    services.power_off(switched_off.pk, actor=SYSTEM_ACTOR, reason="idle", enqueue=False)
    Node.objects.filter(pk=failed.pk).update(power_state=Node.Power.FAILED)
    off_links = lm.links_of_nodes({switched_off.name})
    failed_links = lm.links_of_nodes({failed.name})
    broken_links = lm.links_of_nodes({broken.name})
    assert off_links and failed_links and broken_links
    # when all their links go down in one sweep
    down = off_links | failed_links | broken_links
    statuses = {lid: LinkStatus(lid, up=lid not in down) for lid in lm.ends}
    engine = AlarmEngine()
    opened = _down_alarms(engine, statuses, fabric, lm)
    # then only the failures alarm
    assert opened == failed_links | broken_links
    # and when the powered-off node's links come back, nothing clears that never opened
    statuses = {lid: LinkStatus(lid, up=lid not in (failed_links | broken_links)) for lid in lm.ends}
    assert engine.links(statuses, powered_off_links(fabric.pk, lm)) == []


def test_a_node_that_goes_dark_while_on_alarms_even_after_it_is_marked_off_later(attach_bmc):
    # the alarm of a failure stays open when an operator then powers the node off: it clears
    # only when the links are up again
    fabric = make_fabric("alarm2", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    lm = build_link_map(revision_graph(fabric.revision))
    node = Node.objects.filter(fabric=fabric).order_by("pk").first()
    attach_bmc(node)
    links = lm.links_of_nodes({node.name})
    engine = AlarmEngine()
    down = {lid: LinkStatus(lid, up=lid not in links) for lid in lm.ends}
    assert _down_alarms(engine, down, fabric, lm) == links
    services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    assert engine.links(down, powered_off_links(fabric.pk, lm)) == []
    up = {lid: LinkStatus(lid, up=True) for lid in lm.ends}
    cleared = engine.links(up, powered_off_links(fabric.pk, lm))
    assert {t.subject for t in cleared if t.action == "clear"} == links


def test_a_node_booting_as_intended_raises_no_link_down_alarm_while_its_ports_come_up(attach_bmc):
    fabric = make_fabric("alarm3", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    lm = build_link_map(revision_graph(fabric.revision))
    node, other = Node.objects.filter(fabric=fabric).order_by("pk")[:2]
    attach_bmc(node)
    # given a node that is off, then asked to boot (its HCA links are still down while it boots)
    Node.objects.filter(pk=node.pk).update(power_state=Node.Power.OFF)
    services.power_on(node.pk, actor=SYSTEM_ACTOR, reason="needed", enqueue=False)
    assert Node.objects.get(pk=node.pk).power_state == Node.Power.POWERING_ON
    links, other_links = lm.links_of_nodes({node.name}), lm.links_of_nodes({other.name})
    down = links | other_links
    statuses = {lid: LinkStatus(lid, up=lid not in down) for lid in lm.ends}
    # then only the node that is on alarms
    assert _down_alarms(AlarmEngine(), statuses, fabric, lm) == other_links
