"""On a lab fabric (OpenSM on ibsim) the power policy powers off an idle node past its time:
the node's BMC (the Redfish emulator) reports it off and its HCA cables are pulled, so the leaf
ports it was cabled to go down; the node kept warm by the buffer keeps its ports Active. One lab
for the module.

    [policy] --off--> [su01-n0x] --BMC Off--> [su01-leaf-rN][p] Down  ×8 rails
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.power import policy, services
from console.tenancy.context import Actor
from scheduling.models import Node, Pool
from scheduling.services import inventory
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.power.conftest import SYSTEM_ACTOR, drive_to_end, emulator_power
from tests.power.test_power_lab import _leaf_ends, _states, _until

lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.django_db, pytest.mark.timeout(240)]


def test_the_policy_powers_off_an_idle_node_and_its_links_go_down(
    lab_fabric, attach_bmc, redfish, monkeypatch, django_capture_on_commit_callbacks
):
    drives: list[tuple[int, str]] = []
    monkeypatch.setattr(services, "_publish", lambda node_id, action: drives.append((node_id, action)))
    # given a lab fabric and a pool of two nodes with BMCs, idle for two hours, one kept warm
    fabric, lab = lab_fabric("policy")
    inventory.import_inventory(fabric, actor=SYSTEM_ACTOR)
    nodes = list(Node.objects.filter(fabric=fabric, name__in=["su01-n06", "su01-n07"]).order_by("name"))
    bmcs = {n.pk: attach_bmc(n) for n in nodes}
    Node.objects.filter(pk__in=[n.pk for n in nodes]).update(power_changed_at=timezone.now() - dt.timedelta(hours=2))
    pool = Pool.objects.create(fabric=fabric, name="policy-lab")
    pool.nodes.set(nodes)
    ends = {n.pk: _leaf_ends(fabric, lab, n) for n in nodes}
    assert all(_states(lab, e) == ["Active"] * 8 for e in ends.values())
    policy.set_policy(pool.pk, actor=Actor.system("tests"), data={"enabled": True, "buffer_nodes": 1})

    # when the policy runs and the worker carries out the BMC task it enqueued
    with django_capture_on_commit_callbacks(execute=True):
        run = policy.apply(pool.pk)
    off, warm = nodes  # equal idle times and groups: by name
    assert [(a["node"], a["action"], a["outcome"]) for a in run.actions] == [(off.name, "off", "done")]
    assert drives == [(off.pk, "off")]
    assert drive_to_end(off.pk, "off") == "off"

    # then its BMC reports it off and every leaf port it was cabled to is down; the warm node's are Active
    assert emulator_power(redfish, bmcs[off.pk]) == "Off"
    assert _until(lambda: _states(lab, ends[off.pk]), ["Down"] * 8) == ["Down"] * 8
    assert _states(lab, ends[warm.pk]) == ["Active"] * 8
    assert emulator_power(redfish, bmcs[warm.pk]) == "On"
