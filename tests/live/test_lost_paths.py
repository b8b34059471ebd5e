"""Nodes that lost their path, from the collector's link alarms (console.telemetry.lost_paths): a
host link down marks its node (draining: no new placement; the reason names the link), a second
link down names both, and the node is back when every link is up again. The host links of each
node are read here from the design graph."""

from __future__ import annotations

import pytest

from console.telemetry import lost_paths, services
from console.telemetry.alarms import Transition
from console.telemetry.models import FabricEvent
from scheduling.models import Node
from tests.live.fabric_fixtures import world  # noqa: F401 (fixture)
from tests.live.helpers import SYSTEM

pytestmark = pytest.mark.django_db
DOWN = FabricEvent.Kind.LINK_DOWN


def alarm(world, action: str, link: str) -> list[FabricEvent]:  # noqa: F811
    fabric, collector = world["fabric"], world["collector"]
    events = services.apply_transitions(
        fabric.pk, [Transition(action, DOWN, link, "critical", f"link {link} down")], {}, actor=SYSTEM
    )
    lost_paths.update(fabric.pk, collector.lm, events)
    return events


def test_a_host_link_down_marks_its_node_until_every_link_is_back(world):  # noqa: F811
    lm = world["collector"].lm
    name = sorted(world["res_a"].allocations.values_list("node__name", flat=True))[0]
    first, second = sorted(f"{leaf}/{port}" for leaf, port in lm.node_uplinks[name].values())[:2]
    alarm(world, "open", first)
    node = Node.objects.get(fabric=world["fabric"], name=name)
    assert node.state == Node.State.DRAINING
    assert node.path_lost == f"ibconsole: link {first} down (1 of {len(lm.node_uplinks[name])} of its ports)"
    alarm(world, "open", second)
    node.refresh_from_db()
    assert node.path_lost.startswith(f"ibconsole: links {first}, {second} down (2 of ")
    alarm(world, "clear", first)
    node.refresh_from_db()
    assert node.path_lost.startswith(f"ibconsole: link {second} down") and node.state == Node.State.DRAINING
    alarm(world, "clear", second)
    node.refresh_from_db()
    assert (node.state, node.path_lost) == (Node.State.AVAILABLE, "")


def test_a_switch_link_down_marks_no_node(world):  # noqa: F811
    lm = world["collector"].lm
    hosts = {f"{leaf}/{port}" for ports in lm.node_uplinks.values() for leaf, port in ports.values()}
    spine_link = next(lid for lid in sorted(lm.ends) if lid not in hosts)
    alarm(world, "open", spine_link)
    assert not Node.objects.filter(fabric=world["fabric"]).exclude(path_lost="").exists()
