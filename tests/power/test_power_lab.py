"""On a lab fabric (OpenSM on ibsim) a node's HCA cables are pulled when its BMC reports it off
and put back when it reports it on. The ports are read from the other end of each cable, the
leaf switch port, with ``smpquery portinfo`` routed by OpenSM's LIDs (not the directed route the
power code reads back with).

    [su01-leaf-rN][p] ---- [node HCA-N]     ×8 rails
"""

from __future__ import annotations

import time

import pytest

from console.fabric.lab import faults
from console.power import services
from console.telemetry.linkmap import build_link_map
from designer.services import revision_graph
from scheduling.models import Node
from scheduling.services import inventory
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.power.conftest import SYSTEM_ACTOR, emulator_power

lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.django_db, pytest.mark.timeout(240)]


def _leaf_ends(fabric, lab, node: Node) -> list[tuple[int, int]]:
    """(leaf LID, leaf port) of every HCA cable of ``node``, from a discovery while they are in."""
    uplinks = build_link_map(revision_graph(fabric.revision)).node_uplinks[node.name]
    topology = lab.diags(timeout=10).ibnetdiscover()
    ends = []
    for leaf, leaf_port in uplinks.values():
        sim_id, sim_port = faults.resolve_port(fabric, leaf, leaf_port)
        ends.append((topology.nodes[sim_id].lid, sim_port))
    return ends


def _states(lab, ends) -> list[str]:
    diags = lab.diags(timeout=10)
    return [diags.portinfo(lid, port).link_state for lid, port in ends]


def _until(read, wanted, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    seen = read()
    while seen != wanted and time.monotonic() < deadline:
        time.sleep(0.2)
        seen = read()
    return seen


def test_powered_off_node_has_its_ports_down_and_active_again_after_boot(lab_fabric, attach_bmc, redfish):
    # given a lab fabric, its inventory and a node with a BMC
    fabric, lab = lab_fabric("power")
    inventory.import_inventory(fabric, actor=SYSTEM_ACTOR)
    node = Node.objects.get(fabric=fabric, name="su01-n03")
    bmc = attach_bmc(node)
    ends = _leaf_ends(fabric, lab, node)
    assert len(ends) == 8 and _states(lab, ends) == ["Active"] * 8
    # when it is powered off and the BMC reports it off
    services.power_off(node.pk, actor=SYSTEM_ACTOR, reason="idle", enqueue=False)
    assert services.drive(node.pk, "off") == "off"
    assert emulator_power(redfish, bmc) == "Off"
    # then every leaf port it was cabled to is down
    assert _until(lambda: _states(lab, ends), ["Down"] * 8) == ["Down"] * 8
    # when it is powered on again, its ports come back Active (OpenSM brings them up)
    services.power_on(node.pk, actor=SYSTEM_ACTOR, reason="needed", enqueue=False)
    assert services.drive(node.pk, "on") == "on"
    assert _until(lambda: _states(lab, ends), ["Active"] * 8, seconds=60) == ["Active"] * 8
