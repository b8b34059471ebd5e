"""Subnet-manager high availability on the lab: a master and a standby OpenSM on two CAs of one
ibsim fabric, each with its own files and its own agent (``manage.py agent --lab-sm``), both
connected to a real uvicorn. The console pushes every change to both; the master dies; the
standby takes over with the console's partitions. The wire is read here with infiniband-diags
(``smpquery``, ``sminfo``), independently of the console's own readers.
"""

from __future__ import annotations

import io
import json
import time

import pytest
from django.core.management import CommandError, call_command

from console.fabric import changes
from console.fabric.agents import services
from console.fabric.models import ChangeRequest, FabricAgent
from console.notify.models import Event as NotifyEvent
from console.telemetry.agents import watch
from console.telemetry.models import FabricEvent
from console.telemetry.sm_ha import TAKEOVER_NOTICE
from console.tenancy.models import AuditEntry, Role
from scheduling.models import HCA, Reservation
from scheduling.services import quotas
from tests.fabric import agent_fixtures
from tests.fabric.agent_fixtures import ACTOR, OPERATOR, hca_guids, until
from tests.fabric.agent_fixtures import apply_as_worker as apply
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import book, whole_lab_pool, with_agent

lab_data_dir = agent_fixtures.lab_data_dir
lab_fabric = agent_fixtures.lab_fabric
su1_revision = agent_fixtures.su1_revision

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(300), pytest.mark.django_db(transaction=True)]

#: The issue's bound: from the master's death to the standby's port answering MASTER.
TAKEOVER_BOUND_S = 15.0


def lids_of(lab, guids: list[int]) -> dict[int, int]:
    """Port GUID → LID, from ibnetdiscover (the CA ports' GUIDs)."""
    by_guid = {n.guid + 1: n.lid for n in lab.diags().ibnetdiscover().nodes.values() if not n.is_switch}
    return {g: by_guid[g] for g in guids}


def port_tables(lab, lids: list[int]) -> dict[int, tuple[str, str, str]]:
    """Each port's P_Key table, SL2VL table and VL arbitration tables as smpquery prints them."""
    diags = lab.diags(timeout=10)
    return {
        lid: tuple(diags.run("smpquery", what, str(lid)).stdout.strip() for what in ("pkeys", "sl2vl", "vlarb"))
        for lid in lids
    }


def agent(fabric, name: str) -> FabricAgent:
    return FabricAgent.objects.get(fabric=fabric, name=name)


def test_the_standby_holds_the_same_files_takes_over_in_seconds_and_no_port_changes(lab_fabric, tenant_a):
    fabric, lab = lab_fabric("ha", standby=True)
    pool = whole_lab_pool(fabric)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    reservation = book(pool, tenant_a, 16, "before-takeover")
    change = changes.reconcile(fabric, actor=ACTOR)
    assert change is not None
    change = apply(change.pk)
    assert change.status == ChangeRequest.Status.APPLIED, (change.error, change.outcome)
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.READY
    members = [
        int(h, 16)
        for h in HCA.objects.filter(node__in=reservation.allocations.values("node")).values_list("port_guid", flat=True)
    ]
    pkey = reservation.pkey
    assert change.steps.get(name="standby", target="lab-standby").status == "ok"
    # both SM hosts hold the same files, each its own priority (read from the files themselves)
    primary, standby = lab.store_of("primary"), lab.store_of("standby")
    assert primary.read("partitions.conf") == standby.read("partitions.conf")
    assert f"{pkey:#06x}" in (standby.read("partitions.conf") or "")
    assert "sm_priority 14" in (primary.read("opensm.conf") or "")
    assert "sm_priority 13" in (standby.read("opensm.conf") or "")
    assert "sminfo_polling_timeout 1000" in (standby.read("opensm.conf") or "")
    until(
        lambda: agent(fabric, "lab").config_hash == agent(fabric, "lab-standby").config_hash != "", 15, "hashes equal"
    )
    assert services.out_of_step(fabric) == []

    lids = list(lids_of(lab, members).values())
    before = port_tables(lab, lids)
    assert f"{pkey | 0x8000:#06x}" in before[lids[0]][0]  # a full member, read with smpquery

    # the master dies (SIGKILL): the standby's own port answers MASTER within the bound
    killed = time.monotonic()
    lab.kill_sm("primary")
    during = book(pool, tenant_a, 16, "during-takeover")  # a reservation made meanwhile
    until(lambda: lab.sm_role("standby")["state"] == "MASTER", TAKEOVER_BOUND_S, "the standby MASTER")
    takeover_s = time.monotonic() - killed
    assert takeover_s <= TAKEOVER_BOUND_S
    lab.reap_dead_clients()

    # its agent raises its priority at once, before any push: the old master cannot take back
    until(lambda: "sm_priority 15" in (standby.read("opensm.conf") or ""), 5, "the new master's raised priority")
    until(lambda: lab.sm_role("standby")["priority"] == 15, 10, "OpenSM running at the raised priority")

    # the takeover is an event with its time, for the operators and the tenants on the fabric
    until(lambda: agent(fabric, "lab-standby").master_since is not None, 15, "the standby's agent reports MASTER")
    watch()
    event = FabricEvent.objects.get(fabric=fabric, kind=FabricEvent.Kind.SM_TAKEOVER)
    assert event.detail["name"] == "lab-standby" and event.status == FabricEvent.Status.OPEN
    assert list(event.tenants.values_list("pk", flat=True)) == [tenant_a.pk]
    notices = NotifyEvent.objects.filter(tenant=tenant_a, type="reservation.fabric_fault")
    assert {n.reservation_id for n in notices} == {reservation.pk, during.pk}  # each reservation on it
    for notice in notices:
        fault = notice.payload["data"]["fault"]
        assert fault["kind"] == "sm_takeover" and fault["message"] == TAKEOVER_NOTICE
        assert "lab" not in str(fault)  # nothing of the operators' SM hosts

    # the reservation made during the takeover is pushed through the new master and ready
    change = changes.reconcile(fabric, actor=ACTOR)
    assert change is not None
    change = apply(change.pk)
    assert change.status == ChangeRequest.Status.APPLIED, (change.error, change.outcome)
    during.refresh_from_db()
    assert during.status == Reservation.Status.READY
    # the new master runs at the takeover priority; the old master's files say standby already
    # (its agent wrote them while its OpenSM was down)
    assert "sm_priority 15" in (standby.read("opensm.conf") or "")
    assert "sm_priority 13" in (primary.read("opensm.conf") or "")
    assert f"{during.pkey:#06x}" in (primary.read("partitions.conf") or "")
    assert port_tables(lab, lids) == before  # the first tenant's ports: not one entry changed

    # the old master comes back: standby, and after the master's next sweep still standby
    lab.restart_sm(sm="primary")
    assert lab.sm_role("primary")["state"] == "STANDBY"
    mark = lab.sweep_mark("standby")
    lab.reload("standby")
    until(lambda: lab.swept_since(mark, "standby"), 30, "a heavy sweep of the master")
    assert lab.sm_role("standby")["state"] == "MASTER"
    assert lab.sm_role("primary")["state"] == "STANDBY"
    assert port_tables(lab, lids) == before

    # every SM host holds the current files: the master goes back to its usual priority
    until(lambda: agent(fabric, "lab").sm_state == "STANDBY", 15, "the old master's agent reports STANDBY")
    assert services.out_of_step(fabric) == ["lab-standby"]  # its priority: 15 → 14
    repair = changes.reconcile(fabric, actor=ACTOR)
    assert repair is not None and repair.reason.startswith("reconcile: SM hosts out of step")
    assert apply(repair.pk).status == ChangeRequest.Status.UNCHANGED  # the same partitions: a priority only
    assert "sm_priority 14" in (standby.read("opensm.conf") or "")
    assert services.out_of_step(fabric) == []
    assert port_tables(lab, lids) == before
    # every SM host back and in step: the failover is over
    watch()
    event.refresh_from_db()
    assert event.status == FabricEvent.Status.RESOLVED and "failover complete" in event.resolution


def test_a_standby_away_during_a_push_gets_the_change_on_its_return(lab_fabric, lab_console):
    fabric, lab = lab_fabric("ha-away", standby=True)
    g = hca_guids(fabric)
    lab.stop_agent("standby")
    FabricAgent.objects.filter(fabric=fabric, name="lab-standby").update(connected=False)
    changes.set_partition(ACTOR, OPERATOR, fabric, name="res", pkey=0x0044, members=[f"{g['su01-n05']:#018x}"])
    change = apply(changes.request_change(ACTOR, OPERATOR, fabric).pk)
    assert change.status == ChangeRequest.Status.APPLIED, (change.error, change.outcome)
    pending = change.steps.get(name="standby", target="lab-standby")
    assert pending.status == "pending" and "pending on lab-standby" in pending.log
    assert "0x0044" not in (lab.store_of("standby").read("partitions.conf") or "")
    listed = {a["name"]: a for a in services.agents_json(fabric)}  # what GET …/agents/ answers
    assert listed["lab-standby"]["in_step"] is False and listed["lab"]["sm_state"] == "MASTER"

    # back: its heartbeat shows its files differ from the master's; the reconcile its return
    # starts pushes to it first thing
    with_agent(fabric, lab_console, sm="standby")
    # (the master too: it ran at the takeover priority while a standby was away)
    until(lambda: services.out_of_step(fabric) == ["lab", "lab-standby"], 20, "the returned standby out of step")
    # the difference is an alarm with the diff of the two hosts' files
    watch()
    drift = FabricEvent.objects.get(fabric=fabric, kind=FabricEvent.Kind.CONFIG_DRIFT)
    assert drift.status == FabricEvent.Status.OPEN and "a push to it is pending" in drift.message
    assert any(line.startswith("-") and "0x0044" in line for line in drift.detail["diff"].splitlines())
    sync = changes.reconcile(fabric, actor=ACTOR)
    assert sync is not None and "lab-standby" in sync.reason
    assert apply(sync.pk).status == ChangeRequest.Status.UNCHANGED  # nothing new for the master
    assert "0x0044" in (lab.store_of("standby").read("partitions.conf") or "")
    until(lambda: agent(fabric, "lab").config_hash == agent(fabric, "lab-standby").config_hash, 15, "hashes equal")
    assert services.out_of_step(fabric) == []
    assert all(a["in_step"] and a["config_hash"] for a in services.agents_json(fabric))
    watch()
    drift.refresh_from_db()
    assert drift.status == FabricEvent.Status.RESOLVED


def test_the_failover_drill_measures_a_takeover_and_finds_no_port_changed(lab_fabric, tenant_a, make_user):
    fabric, lab = lab_fabric("ha-drill", standby=True)
    pool = whole_lab_pool(fabric)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    reservation = book(pool, tenant_a, 16, "drilled")
    change = changes.reconcile(fabric, actor=ACTOR)
    assert change is not None and apply(change.pk).status == ChangeRequest.Status.APPLIED
    until(lambda: agent(fabric, "lab").config_hash == agent(fabric, "lab-standby").config_hash, 15, "hashes equal")

    # tenants may not; a change being pushed refuses it
    make_user("alice-drill", Role.TENANT_ADMIN, tenant_a)
    with pytest.raises(CommandError):
        call_command("fabric", "--as", "alice-drill", "failover-drill", "--fabric", fabric.name, stdout=io.StringIO())
    ChangeRequest.objects.filter(pk=change.pk).update(status=ChangeRequest.Status.APPLYING)
    with pytest.raises(CommandError, match="being pushed"):
        call_command("fabric", "failover-drill", "--fabric", fabric.name, stdout=io.StringIO())
    ChangeRequest.objects.filter(pk=change.pk).update(status=ChangeRequest.Status.APPLIED)

    # the dry run touches nothing and finds the standby ready
    out = io.StringIO()
    call_command("fabric", "failover-drill", "--fabric", fabric.name, "--dry-run", "--json", stdout=out)
    dry = json.loads(out.getvalue())
    assert dry["mode"] == "dry-run" and dry["ready"] and dry["standbys"][0]["problems"] == [], dry["standbys"]
    assert lab.sm_role("primary")["state"] == "MASTER"

    out = io.StringIO()
    call_command("fabric", "failover-drill", "--fabric", fabric.name, "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["mode"] == "lab" and report["master"] == "lab" and report["new_master"] == "lab-standby"
    assert 0 < report["detection_s"] <= report["takeover_s"] <= TAKEOVER_BOUND_S
    members = HCA.objects.filter(node__in=reservation.allocations.values("node")).count()
    assert report["ports_checked"] == members == 16
    assert report["differences"] == []
    assert report["old_master"] == "STANDBY"
    # the wire and the SMs agree with the report, read here with infiniband-diags
    assert lab.sm_role("standby")["state"] == "MASTER" and lab.sm_role("primary")["state"] == "STANDBY"
    assert AuditEntry.objects.filter(action="fabric.failover_drill", object_id=str(fabric.pk)).count() == 2
    # lab status --json lists the SMs with pid, role and priority, as their own ports answer
    out = io.StringIO()
    call_command("lab", "status", "--fabric", fabric.name, "--json", stdout=out)
    sms = {sm["name"]: sm for sm in json.loads(out.getvalue())["sms"]}
    assert sms["standby"]["role"] == "MASTER" and sms["primary"]["role"] == "STANDBY"
    # the new master at 15 until every SM host holds the current files, then 14; the old one 13
    assert sms["standby"]["priority"] in (14, 15) and sms["primary"]["priority"] == 13
    assert all(sm["pid"] and sm["agent_pid"] for sm in sms.values())
