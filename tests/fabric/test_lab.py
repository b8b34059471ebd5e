"""The real lab: ibsim + OpenSM 3.3 under umad2sim, driven through console.fabric."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from console.fabric.diags.runner import DiagError, DiagTimeout
from console.fabric.lab.manager import Lab
from console.fabric.lab.routing import routing_engine_in_use, wait_for_routing
from console.fabric.lab.spec import LabError, LabSpec
from console.fabric.opensm.files import Artefact
from console.fabric.opensm.lint import ArtefactRejected
from console.fabric.opensm.partitions import Member, Partition
from console.fabric.opensm.push import PushOptions, push_partitions
from tests.fabric.conftest import requires_lab

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(180)]


def hca_guids(lab: Lab) -> dict[str, int]:
    """Port GUID of each HCA by node description (ibsim: node GUID + 1)."""
    return {n.description: n.guid + 1 for n in lab.topology.cas()}


def lids(lab: Lab) -> dict[str, int]:
    return {n.name: n.lid for n in lab.diags().ibnetdiscover().nodes.values()}


def reservation(lab: Lab, pkey: int = 0x0003) -> Partition:
    """16 member HCAs (hca01-hca16), every fourth one limited."""
    g = hca_guids(lab)
    return Partition(
        "resv1",
        pkey,
        ipoib=True,
        members=[Member(g[f"hca{i:02d}"], "limited" if i % 4 == 0 else "full") for i in range(1, 17)],
    )


def test_lab_comes_up_and_is_controllable_from_another_process(start_lab):
    lab = start_lab("a")
    status = lab.status(probe=True)
    for key in ("ibsim_sockname", "umad2sim", "sm_host", "opensm_pid", "ibsim_pid", "workdir"):
        assert status[key], key
    assert status["state"] == "up" and status["sm_state"] == "MASTER"
    assert status["up_seconds"] < 30
    code = (
        "import json,sys; from console.fabric.lab.manager import Lab; "
        "l=Lab.attach(sys.argv[1]); print(json.dumps(l.status())); l.stop()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, status["workdir"]],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout)["opensm_pid"] == status["opensm_pid"]
    assert Lab.attach(status["workdir"]).status()["state"] == "stopped"
    assert not lab.is_running()
    lab.stop()  # idempotent


def test_push_reservation_sets_membership_bits_and_isolates(start_lab):
    lab = start_lab("push")
    part = reservation(lab)
    result = push_partitions(lab, [part])
    assert result.outcome == "verified", result.mismatches
    assert [s.status for s in result.steps] == ["ok"] * 5
    lid = lids(lab)
    diags = lab.diags()
    for i in range(1, 17):
        table = diags.pkeys(lid[f"hca{i:02d}"])
        assert table.membership(0x0003) == ("limited" if i % 4 == 0 else "full"), i
        raw = {e.raw for e in table.entries}
        assert (0x0003 if i % 4 == 0 else 0x8003) in raw
    for i in range(17, 25):
        assert diags.pkeys(lid[f"hca{i:02d}"]).membership(0x0003) is None, i
    assert not diags.path(lid["hca01"], lid["hca20"], pkey=0x0003).found
    assert diags.path(lid["hca01"], lid["hca02"], pkey=0x0003).found
    assert not diags.path(lid["hca04"], lid["hca08"], pkey=0x0003).found  # limited ↔ limited
    again = push_partitions(lab, [part])
    assert again.outcome == "unchanged" and again.step("reload").status == "skipped"


def test_broken_artefact_is_refused_before_opensm_sees_it(start_lab):
    lab = start_lab("refuse")
    assert push_partitions(lab, [reservation(lab)]).ok
    live_before = lab.artefacts.read("partitions.conf")
    mtime = lab.artefacts.path("partitions.conf").stat().st_mtime_ns
    refused = push_partitions(lab, [reservation(lab), Partition("bad", 0x8001)])
    assert refused.outcome == "refused" and refused.step("render").status == "failed"
    broken = live_before.replace("=limited", "=limitd", 1)
    with pytest.raises(ArtefactRejected) as exc:
        lab.artefacts.swap([Artefact("partitions", "partitions.conf", broken)])
    assert exc.value.problems[0].code == "bad-membership"
    assert lab.artefacts.read("partitions.conf") == live_before
    assert lab.artefacts.path("partitions.conf").stat().st_mtime_ns == mtime
    lid = lids(lab)
    assert lab.diags().pkeys(lid["hca04"]).membership(0x0003) == "limited"


def test_verification_mismatch_rolls_back_and_rollback_is_verified(start_lab):
    lab = start_lab("rollback")
    good = reservation(lab)
    assert push_partitions(lab, [good]).ok
    lkg = lab.artefacts.read("partitions.conf")
    g = hca_guids(lab)
    # hca17 in 64 more partitions: with the Default it needs 65 entries and ibsim's CA table
    # holds 64 (PartitionCap), so OpenSM cannot program one of the keys: a present port that
    # does not show its key is a real mismatch, and it rolls the whole change back.
    crowd = [Partition(f"p{i}", 0x0100 + i, members=[Member(g["hca17"])]) for i in range(64)]
    result = push_partitions(lab, [good, *crowd], PushOptions(verify_timeout=3, check_paths=False))
    assert result.outcome == "rolled_back", result.mismatches
    assert result.step("verify").status == "failed"
    assert result.step("rollback").status == "ok"
    assert any(m.startswith(f"0x{g['hca17']:016x} P_Key") and "no key" in m for m in result.mismatches)
    assert lab.artefacts.read("partitions.conf") == lkg
    lid = lids(lab)
    deadline = time.monotonic() + 10
    while lab.diags().pkeys(lid["hca17"]).membership(0x0100) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert lab.diags().pkeys(lid["hca17"]).membership(0x0100) is None
    assert lab.diags().pkeys(lid["hca01"]).membership(0x0003) == "full"


def test_a_member_not_on_the_fabric_is_a_finding_not_a_rollback(start_lab):
    lab = start_lab("absent")
    g = hca_guids(lab)
    good = reservation(lab)
    # A member GUID that is not on the fabric (a host unplugged or powered off): OpenSM accepts
    # the file, no port can show the key. That partition's finding; the others are verified.
    ghost = 0x0002C903DEADBE01
    other = Partition("resv2", 0x0004, members=[Member(g["hca17"]), Member(ghost)])
    result = push_partitions(lab, [good, other], PushOptions(verify_timeout=3))
    assert result.outcome == "verified", result.mismatches
    assert result.absent_members == {"0x0004": [f"0x{ghost:016x}"]}
    lid = lids(lab)
    assert lab.diags().pkeys(lid["hca17"]).membership(0x0004) == "full"
    assert lab.diags().pkeys(lid["hca01"]).membership(0x0003) == "full"


def test_default_partition_isolates_tenants_and_every_host_reaches_the_sm(start_lab):
    """Two tenants' partitions and a storage partition on the wire: no PathRecord between the
    tenants on any P_Key (with or without one: the SA picks any shared key it may), paths inside
    each, both reach the storage host, free hosts reach nothing but the SM."""
    lab = start_lab("isolation")
    g = hca_guids(lab)
    tenant_a = Partition("a", 0x0101, members=[Member(g[f"hca0{i}"]) for i in (1, 2, 3)])
    tenant_b = Partition("b", 0x0102, members=[Member(g[f"hca0{i}"]) for i in (5, 6, 7)])
    storage = Partition(
        "storage",
        0x0103,
        members=[Member(g["hca10"]), *(Member(g[f"hca0{i}"], "limited") for i in (1, 2, 3, 5, 6, 7))],
    )
    result = push_partitions(lab, [tenant_a, tenant_b, storage])
    assert result.outcome == "verified", result.mismatches
    verify_log = result.step("verify").log
    assert any("in 0x7fff: none" in line for line in verify_log), verify_log  # two hosts, Default
    lid = lids(lab)
    diags = lab.diags()
    for a in ("hca01", "hca02", "hca03"):
        for b in ("hca05", "hca06", "hca07"):
            for pkey in (None, 0x7FFF, 0x0101, 0x0102, 0x0103):
                assert not diags.path(lid[a], lid[b], pkey=pkey).found, (a, b, pkey)
    assert diags.path(lid["hca01"], lid["hca03"]).found
    assert diags.path(lid["hca05"], lid["hca07"], pkey=0x0102).found
    for host in ("hca01", "hca06"):
        assert diags.path(lid[host], lid["hca10"], pkey=0x0103).found
    assert not diags.path(lid["hca11"], lid["hca12"]).found  # two free hosts
    assert not diags.path(lid["hca11"], lid["hca01"]).found
    assert not diags.path(lid["hca11"], lid["hca10"]).found  # free host, storage host
    assert diags.path(lid["hca11"], lid["hca24"], pkey=0x7FFF).found  # the SM's port
    assert diags.pkeys(lid["hca11"]).membership(0x7FFF) == "limited"
    assert diags.pkeys(lid["hca24"]).membership(0x7FFF) == "full"


def test_unplug_is_detected_with_routing_fallback_and_replug_clears(start_lab):
    lab = start_lab("cable")
    assert not routing_engine_in_use(lab).fallback
    diags = lab.diags()
    leaf1 = lids(lab)["leaf1"]
    links_before = len(diags.ibnetdiscover().links)
    lab.unplug("leaf1", 7)  # leaf1 ↔ spine1
    status = wait_for_routing(lab, fallback=True)
    assert status.fallback and status.in_use == "minhop", status
    assert any("cannot build lid matrices" in line for line in status.evidence)
    assert diags.portinfo(leaf1, 7).is_down
    assert len(diags.ibnetdiscover().links) == links_before - 1
    lab.replug("leaf1", 7)
    assert not wait_for_routing(lab, fallback=False).fallback
    deadline = time.monotonic() + 10
    while not diags.portinfo(leaf1, 7).is_active and time.monotonic() < deadline:
        time.sleep(0.1)
    assert diags.portinfo(leaf1, 7).is_active
    assert len(diags.ibnetdiscover().links) == links_before


def test_counters_and_console_names(start_lab):
    lab = start_lab("counters")
    lab.set_counter("hca03", 1, SymbolErrorCounter=50, LinkDownedCounter=2)
    counters = lab.diags().perfquery(lids(lab)["hca03"], 1)
    assert (counters["SymbolErrorCounter"], counters["LinkDownedCounter"]) == (50, 2)
    with pytest.raises(LabError, match="cannot be found"):
        lab.set_counter("hca03", 1, NoSuchCounter=1)
    with pytest.raises(LabError, match="no node"):
        lab.unplug("nosuch", 1)
    # ibsim's console only knows node ids; the description is refused by ibsim itself.
    assert "not found" in lab.console('Unlink "leaf1"[7]')


def test_ibsims_log_stays_bounded_and_the_console_keeps_answering(start_lab, monkeypatch):
    from console.fabric.lab import ibsim_console

    lab = start_lab("ibsimlog")
    monkeypatch.setattr(ibsim_console, "LOG_MAX_BYTES", 20_000)
    monkeypatch.setattr(ibsim_console, "LOG_KEEP_BYTES", 2_000)
    log = lab.workdir / "ibsim.log"
    # every counter set is echoed by ibsim: a few hundred of them write well past the bound
    for i in range(400):
        lab.set_counter("hca03", 1, SymbolErrorCounter=i)
        assert log.stat().st_size <= 20_000 + 4_096, log.stat().st_size
    kept = (lab.workdir / "ibsim.log.1").read_bytes()
    assert 0 < len(kept) <= 2_000 and b"SymbolErrorCounter" in kept
    # and the console's replies are still found after each cut: the last value set is read back
    counters = lab.diags().perfquery(lids(lab)["hca03"], 1)
    assert counters["SymbolErrorCounter"] == 399


def test_diag_calls_time_out_and_fail_cleanly(start_lab):
    lab = start_lab("timeouts")
    with pytest.raises(DiagTimeout, match="timed out"):
        lab.diags().run("ibnetdiscover", timeout=0.001)
    with pytest.raises(DiagError):
        lab.diags(timeout=5).pkeys(999)


def test_two_labs_side_by_side(start_lab):
    a, b = start_lab("a"), start_lab("b")
    assert a.status()["ibsim_sockname"] != b.status()["ibsim_sockname"]
    assert push_partitions(a, [reservation(a, 0x0005)]).ok
    assert a.diags().pkeys(lids(a)["hca01"]).membership(0x0005) == "full"
    assert b.diags().pkeys(lids(b)["hca01"]).membership(0x0005) is None
    same_socket = LabSpec(
        net_text=(a.workdir / "fabric.net").read_text(),
        workdir=a.workdir.parent / "c",
        sm_host="hca24",
        socket_name=a.status()["ibsim_sockname"],
    )
    with pytest.raises(LabError, match="already in use"):  # refused before ibsim would panic
        Lab.start(same_socket)
