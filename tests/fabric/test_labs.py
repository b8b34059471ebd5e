"""The lab registry: a saved design becomes a running lab bound to its Fabric (real OpenSM on
ibsim), found again from the Fabric, side by side with others, stopped cleanly."""

from __future__ import annotations

import pytest

from console.fabric.lab.fabrics import LabNotRunning, LabUnavailable, lab_for, missing_packages, start_lab, stop_lab
from console.fabric.lab.faults import parse_counter_assignments, replug, set_counters, unplug
from console.fabric.lab.plan import lab_plan
from console.fabric.lab.routing import routing_engine_in_use
from console.fabric.lab.spec import LabError
from console.fabric.models import Fabric
from console.tenancy.models import AuditEntry, Principal, Role
from designer.plan import plan
from designer.services import create_design
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import ACTOR

# Fixtures shared with the other lab test modules.
lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(180), pytest.mark.django_db]


def test_saved_one_su_design_comes_up_under_ftree_without_fallback(lab_fabric, lab_data_dir):
    fabric, lab = lab_fabric("su1")
    # given a saved 1-SU rail-optimised design, the lab runs OpenSM with ftree and its inputs
    assert fabric.driver == Fabric.Driver.LAB
    assert fabric.config["workdir"] == str((lab_data_dir / "labs" / fabric.name).resolve())
    assert fabric.config["ibsim_sockname"] == lab.status()["ibsim_sockname"]
    assert lab.status()["state"] == "up"
    roots = lab.artefacts.read("root_guids.conf").split()
    cns = lab.artefacts.read("cn_guids.conf").split()
    assert len(roots) == 4 and len(cns) == 256  # the 4 spines; every compute HCA port
    # then ftree really routed the subnet (no silent minhop fallback)
    routing = routing_engine_in_use(lab)
    assert (routing.configured, routing.in_use, routing.fallback) == ("ftree", "ftree", False)
    found = lab.diags().ibnetdiscover()
    assert len(found.switches()) == 12 and len(found.cas()) == 256
    creations = AuditEntry.objects.filter(action="fabric.create", object_id=str(fabric.pk))
    assert creations.count() == 1


def test_start_again_reuses_the_fabric_and_the_running_lab(lab_fabric, su1_revision):
    fabric, lab = lab_fabric("reuse")
    again, lab2 = start_lab(su1_revision, name=fabric.name, actor=ACTOR)
    assert again.pk == fabric.pk and lab2.opensm_pid == lab.opensm_pid
    # without a name, the revision's lab fabric is reused too
    third, _ = start_lab(su1_revision, actor=ACTOR)
    assert third.pk == fabric.pk
    assert Fabric.objects.filter(revision=su1_revision).count() == 1
    assert AuditEntry.objects.filter(action="fabric.create").count() == 1


def test_lab_for_finds_the_lab_and_refuses_clearly_when_it_is_not_running(lab_fabric):
    fabric, lab = lab_fabric("find")
    found = lab_for(Fabric.objects.get(pk=fabric.pk))
    assert found.opensm_pid == lab.opensm_pid and found.is_running()
    status = stop_lab(fabric, actor=ACTOR)
    assert status["state"] == "stopped" and not lab.is_running()
    with pytest.raises(LabNotRunning, match="not running .*lab up --design"):
        lab_for(fabric)
    assert AuditEntry.objects.filter(action="fabric.lab.stop").count() == 1
    never = Fabric.objects.create(name="never-started", revision=fabric.revision)
    with pytest.raises(LabNotRunning, match="no lab has been started"):
        lab_for(never)
    other = Fabric.objects.create(name="host", revision=fabric.revision, driver="opensm")
    with pytest.raises(LabNotRunning, match="opensm driver"):
        lab_for(other)


def test_two_labs_run_side_by_side_without_touching_each_other(lab_fabric):
    (fa, a), (fb, b) = lab_fabric("a"), lab_fabric("b")
    assert fa.pk != fb.pk
    assert a.status()["ibsim_sockname"] != b.status()["ibsim_sockname"]
    assert a.workdir != b.workdir
    links = len(b.diags().ibnetdiscover().links)
    unplug(fa, "su01-leaf-r2", 33)
    assert len(a.diags().ibnetdiscover().links) == links - 1
    assert len(b.diags().ibnetdiscover().links) == links  # the other lab is untouched


def test_fault_injection_uses_design_names_and_sets_error_and_data_counters(lab_fabric):
    fabric, lab = lab_fabric("faults")
    lids = {n.name: n.lid for n in lab.diags().ibnetdiscover().nodes.values()}
    hca = lids["su01-n03 HCA-2"]  # design node su01-n03, port 2 = its HCA-2
    counters = parse_counter_assignments(["SymbolErrorCounter=50", "PortXmitData=0x10000"])
    set_counters(fabric, "su01-n03", 2, counters, actor=ACTOR)
    basic = lab.diags().perfquery(hca, 1)
    extended = lab.diags().perfquery(hca, 1, extended=True)
    assert basic["SymbolErrorCounter"] == 50
    # ibsim counts the MADs themselves (perfquery's own replies) on top of the value set
    for value in (basic["PortXmitData"], extended["PortXmitData"]):
        assert 0x10000 <= value < 0x10000 + 1024, value
    leaf = lids["MF0;su01-leaf-r1:MQM9700/U1"]
    unplug(fabric, "su01-leaf-r1", 40, actor=ACTOR)
    assert lab.diags().portinfo(leaf, 40).is_down
    replug(fabric, "su01-leaf-r1", 40, actor=ACTOR)
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"fabric.lab.counters", "fabric.lab.unplug", "fabric.lab.replug"} <= actions
    with pytest.raises(ValueError, match="COUNTER=VALUE"):
        parse_counter_assignments(["SymbolErrorCounter"])
    with pytest.raises(LabError, match="no node"):
        unplug(fabric, "no-such-switch", 1)


def test_missing_debian_packages_are_named(monkeypatch, su1_revision, lab_data_dir):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert {"opensm", "ibsim-utils", "infiniband-diags"} <= set(missing_packages())
    with pytest.raises(LabUnavailable, match="apt-get install opensm"):
        start_lab(su1_revision, actor=ACTOR)
    assert not Fabric.objects.exists()  # refused before anything was created


def test_a_torus_design_runs_torus_2qos(lab_fabric):
    torus = {
        "topology": "torus",
        "nodes": 64,
        "dims": "4x4x4",
        "node_type": "generic",
        "gpus_per_node": 1,
        "hcas_per_node": 1,
    }
    _, revision = create_design(ACTOR, Principal(None, Role.OPERATOR, None), name="torus-lab", options=torus)
    _, lab = lab_fabric("torus", revision)
    routing = routing_engine_in_use(lab)
    assert routing.in_use == "torus-2QoS" and not routing.fallback


def test_lab_plan_follows_the_design():
    fat = lab_plan(plan({"topology": "fat-tree", "gpus": 512}).graph)
    assert fat.routing_engine == "ftree" and fat.root_guids and len(fat.cn_guids) == 512
    dragonfly = lab_plan(plan({"topology": "dragonfly-plus", "nodes": 256}).graph)
    assert dragonfly.routing_engine == "updn" and dragonfly.root_guids and not dragonfly.cn_guids
    assert dragonfly.sm_host.startswith("H-") and dragonfly.sm_host_name.endswith("HCA-1")
