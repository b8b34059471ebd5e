"""The fabric's management keys against a tenant with root on a host (real OpenSM on ibsim).

A tenant can run its own subnet manager on its host's port. With OpenSM's default SM_Key (every
OpenSM has 1) the console's SM hands the subnet to a higher-priority one; with the fabric's own
``sm_key`` it ignores it. ibsim does not implement M_Key (linux-rdma/ibsim lists it under TODO),
so the rogue SM still programs the ports in the lab, which real hardware with
``m_key_protection_level`` 2 refuses: the last test shows what ibsim does, and
tests/fabric/test_isolation_lab.py that the isolation audit catches it.
"""

from __future__ import annotations

import pytest

from console.fabric.drivers.base import DesiredFabric
from console.fabric.drivers.opensm import LabHost, OpenSmDriver
from console.fabric.opensm.conf import parse_opensm_conf
from console.fabric.opensm.partitions import Member, Partition
from console.fabric.opensm.push_types import PushOptions, SmKeys
from tests.fabric.conftest import requires_lab
from tests.fabric.rogue_sm import logged, rogue_sm, wait_for
from tests.fabric.test_lab import hca_guids, lids

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(240)]

KEYS = SmKeys(m_key=0x5EC0000000000103, sm_key=0x5EC0000000000101, sa_key=0x5EC0000000000102)


def our_sm_state(lab) -> str:
    """The state of the lab's own SM (its LID asked directly, not whichever SM is master)."""
    diags = lab.diags(timeout=10)
    lid = lids(lab)["hca24"]
    return diags.run("sminfo", str(lid)).stdout.split()[-1].removeprefix("SMINFO_")


def push_tenant_partition(lab, keys: SmKeys | None) -> None:
    g = hca_guids(lab)
    desired = DesiredFabric(partitions=(Partition("res-1", 0x0101, members=[Member(g["hca01"]), Member(g["hca02"])]),))
    result = OpenSmDriver(LabHost(lab)).push(desired, options=PushOptions(keys=keys))
    assert result.ok, result.mismatches


def test_without_the_fabric_keys_a_rogue_sm_on_a_host_takes_the_subnet(start_lab, tmp_path):
    lab = start_lab("nokeys")
    push_tenant_partition(lab, None)
    assert parse_opensm_conf(lab.artefacts.read("opensm.conf")).get("sm_key") is None  # OpenSM's default: 1
    with rogue_sm(lab, "hca01", tmp_path / "rogue"):
        wait_for(lambda: our_sm_state(lab) == "STANDBY", 60, "the console's SM handing over to the rogue")


def test_with_the_fabric_keys_the_consoles_sm_stays_master(start_lab, tmp_path):
    lab = start_lab("keys")
    push_tenant_partition(lab, KEYS)
    options = parse_opensm_conf(lab.artefacts.read("opensm.conf"))
    assert options["sm_key"] == f"{KEYS.sm_key:#018x}" and options["m_key_protection_level"] == "2"
    with rogue_sm(lab, "hca01", tmp_path / "rogue") as rogue_log:
        # the rogue has found our SM and seen that its SM_Key differs from its own
        wait_for(lambda: logged(rogue_log, "non-matching sm_key"), 60, "the rogue meeting the console's SM")
        wait_for(lambda: logged(lab.opensm_log, "non-matching sm_key"), 60, "the console's SM meeting the rogue")
        assert our_sm_state(lab) == "MASTER"
        # What ibsim does (no M_Key): the rogue, master in its own eyes, programs hca05's P_Key
        # table with its Default=ALL=full. Hardware enforcing m_key_protection_level 2 refuses it.
        lid = lids(lab)["hca05"]
        wait_for(lambda: lab.diags().pkeys(lid).membership(0x7FFF) == "full", 60, "the rogue programming hca05 (ibsim)")
