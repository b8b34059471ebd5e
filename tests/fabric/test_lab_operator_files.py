"""What an operator wrote on the SM host survives the console's pushes (real OpenSM on ibsim)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from console.fabric.drivers.base import DesiredFabric
from console.fabric.drivers.opensm import LabHost, OpenSmDriver
from console.fabric.opensm.conf import parse_opensm_conf
from console.fabric.opensm.partitions import Member, Partition
from console.fabric.opensm.push import push_partitions
from console.fabric.opensm.push_types import PushOptions, SmKeys
from console.fabric.opensm.qos import QosClass, QosPolicy
from tests.fabric.conftest import requires_lab
from tests.fabric.test_lab import hca_guids, lids

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(180)]

KEYS = SmKeys(m_key=0x5EC0000000000003, sm_key=0x5EC0000000000001, sa_key=0x5EC0000000000002)


def test_a_hand_written_partition_survives_every_push_and_stays_on_the_wire(start_lab):
    lab = start_lab("operator")
    g = hca_guids(lab)
    first = [Partition("res-1", 0x0101, members=[Member(g["hca01"]), Member(g["hca02"])])]
    assert push_partitions(lab, first).ok
    # The operator adds a storage partition by hand (decimal GUID, an abbreviated membership,
    # a comment) and tells OpenSM.
    hand = f"# lustre, added by hand\nstorage=0x0042, ipoib : {g['hca10']}=f, {g['hca01']:#x}=limited ;\n"
    store = lab.artefacts
    store.path("partitions.conf").write_text(store.read("partitions.conf") + hand)
    lab.reload()
    for pushed in ([], first, [Partition("res-2", 0x0102, members=[Member(g["hca05"])])]):
        result = push_partitions(lab, pushed)
        assert result.ok, result.mismatches
        assert [(k.pkey, k.name, k.raw) for k in result.kept] == [(0x0042, "storage", hand)]
        assert hand in store.read("partitions.conf")
    lid = lids(lab)
    assert lab.diags().pkeys(lid["hca10"]).membership(0x0042) == "full"
    assert lab.diags().pkeys(lid["hca01"]).membership(0x0042) == "limited"
    assert lab.diags().pkeys(lid["hca01"]).membership(0x0101) is None  # res-1 released
    # Once the console knows it and an operator deletes it in the console, it goes.
    dropped = push_partitions(lab, [], dropped=[0x0042])
    assert dropped.ok and dropped.kept == [] and "storage" not in store.read("partitions.conf")


def test_an_opensm_c_config_pushes_cleanly_with_qos_and_keys_and_keeps_its_comments(start_lab, tmp_path: Path):
    lab = start_lab("conf")
    generated = tmp_path / "opensm.conf"
    subprocess.run(["opensm", "-c", str(generated)], check=True, timeout=30, capture_output=True)
    written = generated.read_text()
    assert "(null)" in written
    lab.artefacts.path("opensm.conf").write_text(written)  # what an operator starts from
    lab.restart_sm(wait=True)
    g = hca_guids(lab)
    desired = DesiredFabric(
        partitions=(Partition("res-1", 0x0101, sl=2, members=[Member(g["hca01"]), Member(g["hca02"])]),),
        qos=QosPolicy(classes=(QosClass(0x0101, 2, "training"),)),
    )
    driver = OpenSmDriver(LabHost(lab))
    result = driver.push(desired, options=PushOptions(keys=KEYS))
    assert result.ok, (result.outcome, result.mismatches, [str(p) for p in result.problems])
    live = lab.artefacts.read("opensm.conf")
    comments = [line for line in written.splitlines() if line.startswith("#")]
    assert [line for line in live.splitlines() if line.startswith("#")][: len(comments)] == comments
    options = parse_opensm_conf(live)
    assert options["qos"] == "TRUE" and options["sm_key"] == f"{KEYS.sm_key:#018x}"
    assert options["m_key_protection_level"] == "2" and options["log_prefix"] == "(null)"
    assert lab.diags().sminfo().is_master
    assert driver.verify(desired) == []


def test_a_hand_written_partition_survives_a_rollback(start_lab):
    lab = start_lab("rollback-kept")
    g = hca_guids(lab)
    assert push_partitions(lab, [Partition("res-1", 0x0101, members=[Member(g["hca01"])])]).ok
    hand = f"storage=0x0042 : {g['hca10']:#x}=full ;\n"
    store = lab.artefacts
    store.path("partitions.conf").write_text(store.read("partitions.conf") + hand)
    # a push that fails on the wire: hca17 in more partitions than its P_Key table holds
    crowd = [Partition(f"p{i}", 0x0200 + i, members=[Member(g["hca17"])]) for i in range(64)]
    result = push_partitions(lab, crowd, PushOptions(verify_timeout=3, check_paths=False))
    assert result.outcome == "rolled_back", result.mismatches
    assert hand in store.read("partitions.conf")
    assert "res-1=0x0101" in store.read("partitions.conf")  # the last verified state
