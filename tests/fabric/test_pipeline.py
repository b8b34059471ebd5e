"""The push pipeline against the real lab (OpenSM on ibsim): change requests end to end.

hca01..hca06 -- leaf1 --+-- spine1
hca07..hca12 -- leaf2 --+
hca13..hca18 -- leaf3 --+-- spine2
hca19..hca24 -- leaf4 --+        (OpenSM runs on hca24)
"""

from __future__ import annotations

import time

import pytest

from console.fabric import changes, hooks
from console.fabric.changes.pipeline import apply_change
from console.fabric.models import AppliedState, ChangeRequest, FabricPartition, PortAdminState
from console.tenancy.models import AuditEntry
from tests.fabric.conftest import requires_lab
from tests.fabric.pipeline_fixtures import *  # noqa: F403
from tests.fabric.pipeline_fixtures import (
    OPERATOR,
    SYSTEM,
    hca_guids,
    lids,
    reservation_members,
)

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(240), pytest.mark.django_db]
Status = ChangeRequest.Status


@pytest.fixture
def scheduling_calls(monkeypatch):
    """Record what the pipeline tells its change listeners, standing in for the one scheduling
    registers (its body is someone else's)."""
    calls: list[tuple] = []
    recorder = hooks.ChangeListener(
        on_verified=lambda fid, **kw: calls.append(("verified", fid, kw)),
        on_failed=lambda fid, **kw: calls.append(("failed", fid, kw)),
    )
    monkeypatch.setattr(hooks.registry, "change_listeners", {"scheduling": recorder})
    return calls


def reservation_partition(lab, monkeypatch, pkey: int = 0x0003) -> None:
    """Scheduling wants one reservation partition: 16 HCAs, every fourth one limited (a provider
    standing in for the one scheduling registers)."""
    members = reservation_members(lab)
    monkeypatch.setitem(
        hooks.registry.partitions_providers,
        "scheduling",
        lambda fabric_id: [
            {
                "reservation_id": 42,
                "tenant_id": 1,
                "name": "res-42",
                "pkey": pkey,
                "sl": 0,
                "members": members,
            }
        ],
    )


def test_reservation_partition_is_pushed_verified_and_isolating(lab_fabric, monkeypatch, scheduling_calls):
    lab, fabric = lab_fabric
    # given scheduling wants a 16-HCA reservation partition
    reservation_partition(lab, monkeypatch)
    # when a change is requested and applied
    started = time.monotonic()
    change = changes.request_change(SYSTEM, OPERATOR, fabric, reason="res-42")
    assert change.status == Status.QUEUED and "+res-42=0x0003" in change.diff
    change = apply_change(change.pk, worker_id="w1")
    elapsed = time.monotonic() - started
    # then it is verified on the wire, step by step
    assert change.status == Status.APPLIED, (change.error, change.outcome)
    assert change.outcome["opensm_restarted"] is False  # a partition push is a SIGHUP, never a restart
    steps = list(change.steps.values_list("name", "status"))
    assert steps == [
        ("plan", "ok"),
        ("conf", "ok"),  # the first push sets the fabric's management keys in opensm.conf
        ("render", "ok"),
        ("lint", "ok"),
        ("swap", "ok"),
        ("reload", "ok"),
        ("verify", "ok"),
    ]
    lid = lids(lab)
    diags = lab.diags(timeout=10)
    for i in range(1, 17):
        raw = {e.raw for e in diags.pkeys(lid[f"hca{i:02d}"]).entries}
        assert (0x0003 if i % 4 == 0 else 0x8003) in raw, i  # the membership bit
    for i in range(17, 24):
        assert diags.pkeys(lid[f"hca{i:02d}"]).membership(0x0003) is None, i
    assert not diags.path(lid["hca01"], lid["hca20"], pkey=0x0003).found
    assert diags.path(lid["hca01"], lid["hca02"], pkey=0x0003).found
    # and the outcome is recorded once: applied state, scheduling told, one audit of the effect
    applied = AppliedState.objects.get(fabric=fabric)
    assert applied.change_id == change.pk and applied.desired == change.desired
    assert scheduling_calls == [("verified", fabric.pk, {"present_pkeys": {0x0003}, "change_id": change.pk})]
    assert AuditEntry.objects.filter(action="fabric.change.applied").count() == 1
    assert AuditEntry.objects.filter(action="fabric.change.step.ok").count() == 6
    assert elapsed < 10, elapsed
    # reconcile: desired == applied, twice → nothing
    assert changes.reconcile(fabric, actor=SYSTEM) is None
    assert changes.reconcile(fabric, actor=SYSTEM) is None
    assert ChangeRequest.objects.filter(fabric=fabric).count() == 1


def test_reconcile_creates_one_change_then_nothing(lab_fabric, monkeypatch):
    lab, fabric = lab_fabric
    reservation_partition(lab, monkeypatch)
    first = changes.reconcile(fabric, actor=SYSTEM)
    assert first is not None and first.status == Status.QUEUED
    assert changes.reconcile(fabric, actor=SYSTEM) is None  # the open change carries it
    apply_change(first.pk, worker_id="w1")
    assert changes.reconcile(fabric, actor=SYSTEM) is None  # applied now
    assert ChangeRequest.objects.filter(fabric=fabric).count() == 1


def test_dry_run_shows_the_diff_and_changes_nothing(lab_fabric):
    lab, fabric = lab_fabric
    g = hca_guids(lab)
    changes.set_partition(SYSTEM, OPERATOR, fabric, name="train", pkey="0x0005", members=[f"{g['hca01']:#018x}=full"])
    live = lab.artefacts.read("partitions.conf")
    preview = changes.request_change(SYSTEM, OPERATOR, fabric, dry_run=True)
    assert preview.status == Status.PREVIEWED and preview.is_terminal
    assert "+train=0x0005" in preview.diff
    assert lab.artefacts.read("partitions.conf") == live
    assert not AppliedState.objects.filter(fabric=fabric).exists()
    assert apply_change(preview.pk, worker_id="w1") is None  # a preview is never pushed


def test_broken_artefact_is_refused_before_opensm_sees_it(lab_fabric, scheduling_calls):
    lab, fabric = lab_fabric
    g = hca_guids(lab)
    changes.set_partition(SYSTEM, OPERATOR, fabric, name="train", pkey=5, members=[f"{g['hca01']:#018x}"])
    assert apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w").status == Status.APPLIED
    path = lab.artefacts.path("partitions.conf")
    live, mtime = path.read_text(), path.stat().st_mtime_ns
    table_before = lab.diags().pkeys(lids(lab)["hca01"]).pkeys()
    # a change whose desired state was tampered with: the same P_Key twice (OpenSM would merge)
    change = changes.request_change(SYSTEM, OPERATOR, fabric)
    desired = dict(change.desired)
    desired["partitions"] = desired["partitions"] + [
        {"name": "evil", "pkey": "0x0005", "ipoib": False, "sl": 0, "members": [["ALL", "full"]]}
    ]
    ChangeRequest.objects.filter(pk=change.pk).update(desired=desired)
    change = apply_change(change.pk, worker_id="w2")
    assert change.status == Status.FAILED
    assert "duplicate pkey" in change.error
    assert [s.name for s in change.steps.all()] == ["plan", "render"]
    assert path.read_text() == live and path.stat().st_mtime_ns == mtime
    assert lab.diags().pkeys(lids(lab)["hca01"]).pkeys() == table_before
    assert scheduling_calls[-1][0] == "failed"


def test_verification_mismatch_rolls_back_to_last_known_good(lab_fabric, scheduling_calls):
    lab, fabric = lab_fabric
    g = hca_guids(lab)
    changes.set_partition(
        SYSTEM, OPERATOR, fabric, name="good", pkey=3, members=[f"{g['hca01']:#018x}", f"{g['hca02']:#018x}"]
    )
    first = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert first.status == Status.APPLIED
    lkg = lab.artefacts.read("partitions.conf")
    # hca17 in 64 partitions more than its P_Key table (64 entries, the Default among them)
    # holds: OpenSM cannot program one key, a present port shows a wrong table.
    for i in range(64):
        changes.set_partition(
            SYSTEM, OPERATOR, fabric, name=f"crowd{i}", pkey=0x0100 + i, members=[f"{g['hca17']:#018x}"]
        )
    fabric.config = {**fabric.config, "verify_timeout": 3}
    fabric.save()
    change = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == Status.ROLLED_BACK, change.outcome
    assert f"{g['hca17']:#018x} P_Key" in change.error and "no key" in change.error
    by_name = {s.name: s.status for s in change.steps.all()}
    assert by_name["verify"] == "failed" and by_name["rollback"] == "ok"
    assert lab.artefacts.read("partitions.conf") == lkg
    lid = lids(lab)
    assert lab.diags().pkeys(lid["hca17"]).membership(0x0100) is None
    assert lab.diags().pkeys(lid["hca01"]).membership(0x0003) == "full"
    assert AppliedState.objects.get(fabric=fabric).change_id == first.pk
    assert scheduling_calls[-1][0] == "failed"


def test_a_member_off_the_fabric_is_a_finding_and_the_change_is_applied(lab_fabric, scheduling_calls):
    lab, fabric = lab_fabric
    g = hca_guids(lab)
    changes.set_partition(SYSTEM, OPERATOR, fabric, name="good", pkey=3, members=[f"{g['hca01']:#018x}"])
    # a member GUID that is not on the fabric (a host unplugged or powered off): OpenSM takes
    # the file, no port can show it; a partition of only such ports is present nowhere
    changes.set_partition(
        SYSTEM, OPERATOR, fabric, name="ghost", pkey=4, members=[f"{g['hca17']:#018x}", "0x0002c903deadbe01"]
    )
    changes.set_partition(SYSTEM, OPERATOR, fabric, name="gone", pkey=5, members=["0x0002c903deadbe02"])
    change = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == Status.APPLIED, change.outcome
    assert change.outcome["absent_members"] == {"0x0004": ["0x0002c903deadbe01"], "0x0005": ["0x0002c903deadbe02"]}
    assert lab.diags().pkeys(lids(lab)["hca17"]).membership(0x0004) == "full"
    assert AppliedState.objects.get(fabric=fabric).change_id == change.pk
    kind, _, told = scheduling_calls[-1]
    assert kind == "verified" and told["present_pkeys"] == {0x0003, 0x0004}  # not 0x0005


def test_port_admin_disables_and_reenables_a_switch_port(lab_fabric):
    lab, fabric = lab_fabric
    PortAdminState.objects.create(fabric=fabric, switch="leaf3", port=6, enabled=False, reason="bad cable to hca18")
    change = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == Status.APPLIED, change.error
    step = change.steps.get(name="port-admin")
    assert step.target == "leaf3[6]" and step.status == "ok"
    leaf3 = lids(lab)["leaf3"]
    assert lab.diags().port_state(leaf3, 6).phys_state == "Disabled"
    PortAdminState.objects.filter(fabric=fabric).update(enabled=True)
    change = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == Status.APPLIED, change.error
    assert lab.diags().port_state(leaf3, 6).phys_state != "Disabled"


def test_qos_class_restarts_opensm_and_paths_carry_the_sl(lab_fabric):
    lab, fabric = lab_fabric
    g = hca_guids(lab)
    FabricPartition.objects.create(
        fabric=fabric,
        name="prio",
        pkey=6,
        sl=1,
        members=[[f"{g['hca01']:#018x}", "full"], [f"{g['hca07']:#018x}", "full"]],
    )
    pid_before = lab.status()["opensm_pid"]
    change = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == Status.APPLIED, (change.error, list(change.steps.values()))
    qos = change.steps.get(name="qos")
    assert "non-reloadable options changed: qos_policy_file" in qos.log
    assert change.opensm_restarted and change.outcome["opensm_restarted"] is True
    assert change.steps.get(name="verify-qos").status == "ok"
    from console.fabric.lab.manager import Lab

    assert Lab.attach(lab.workdir).status()["opensm_pid"] != pid_before
