"""The ufm driver through the same change pipeline, against ``UfmContractFake`` (a contract fake
of UFM's documented PKey GUIDs, ports, version and actions endpoints — not UFM itself)."""

from __future__ import annotations

import pytest

from console.fabric import changes
from console.fabric.changes.pipeline import apply_change
from console.fabric.drivers.ufm import UfmClient, UfmDriver, UfmError
from console.fabric.models import ChangeRequest, PortAdminState
from tests.fabric.pipeline_fixtures import *  # noqa: F403
from tests.fabric.pipeline_fixtures import OPERATOR, SYSTEM
from tests.fabric.ufm_fake import UfmContractFake

pytestmark = pytest.mark.django_db
HCAS = [f"0002c9030000{0x2001 + 16 * i:04x}" for i in range(24)]


def ports() -> list[dict]:
    hca = [
        {
            "guid": g,
            "name": f"{g}_1",
            "number": 1,
            "system_name": f"hca{i + 1:02d}",
            "systemID": g,
            "physical_state": "LinkUp",
            "logical_state": "Active",
        }
        for i, g in enumerate(HCAS)
    ]
    switch = [
        {
            "guid": "0002c90300001000",
            "name": f"0002c90300001000_{n}",
            "number": n,
            "system_name": "leaf1",
            "systemID": "0002c90300001000",
            "physical_state": "LinkUp",
            "logical_state": "Active",
        }
        for n in (1, 2)
    ]
    return hca + switch


@pytest.fixture
def ufm(monkeypatch):
    monkeypatch.setenv("UFM_TEST_PASSWORD", "secret")
    with UfmContractFake(ports=ports()) as fake:
        yield fake


@pytest.fixture
def fabric(make_fabric, ufm):
    return make_fabric(
        "ufm-fabric", driver="ufm", url=ufm.url, username="admin", password_env="UFM_TEST_PASSWORD", verify_timeout=1
    )


def push(fabric) -> ChangeRequest:
    return apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")


def test_reservation_partition_through_ufm_is_verified_and_idempotent(fabric, ufm):
    members = [f"0x{g}" + ("=limited" if i % 4 == 3 else "") for i, g in enumerate(HCAS[:16])]
    changes.set_partition(SYSTEM, OPERATOR, fabric, name="res-42", pkey="0x0003", members=members, sl=2)
    change = push(fabric)
    assert change.status == "applied", (change.error, list(change.steps.values("name", "log")))
    # a class SL puts the QoS table in the desired state; UFM's SM owns SL2VL/VLArb: said, not pushed
    assert [s.name for s in change.steps.all()] == ["plan", "render", "lint", "apply", "verify", "qos-vl"]
    qos = change.steps.get(name="qos-vl")
    assert qos.status == "skipped" and "not pushed" in qos.log
    stored = ufm.pkeys[0x0003]
    assert stored["partition"] == "res-42" and len(stored["guids"]) == 16
    assert stored["guids"][HCAS[3]] == "limited" and stored["guids"][HCAS[0]] == "full"
    assert stored["qos_conf"]["service_level"] == 2
    assert 0x7FFF not in ufm.pkeys  # UFM's own default partition is left alone
    writes = len([r for r in ufm.requests if r[0] != "GET"])
    again = push(fabric)
    assert again.status == "unchanged"
    assert again.steps.get(name="apply").status == "skipped"
    assert len([r for r in ufm.requests if r[0] != "GET"]) == writes  # set-style: no writes


def test_member_missing_from_the_fabric_rolls_ufm_back(fabric, ufm):
    changes.set_partition(SYSTEM, OPERATOR, fabric, name="good", pkey=3, members=[f"0x{HCAS[0]}"])
    assert push(fabric).status == "applied"
    before = {k: dict(v, guids=dict(v["guids"])) for k, v in ufm.pkeys.items()}
    changes.set_partition(SYSTEM, OPERATOR, fabric, name="good", pkey=3, members=[f"0x{HCAS[0]}", "0x0002c903deadbe01"])
    change = push(fabric)
    assert change.status == "rolled_back"
    assert "not on the fabric" in change.error
    assert change.steps.get(name="rollback").status == "ok"
    assert ufm.pkeys == before


def test_deleted_partition_is_deleted_in_ufm(fabric, ufm):
    changes.set_partition(SYSTEM, OPERATOR, fabric, name="tmp", pkey=5, members=[f"0x{HCAS[1]}"])
    assert push(fabric).status == "applied" and 5 in ufm.pkeys
    changes.delete_partition(SYSTEM, OPERATOR, fabric, name="tmp")
    assert push(fabric).status == "applied"
    assert 5 not in ufm.pkeys and ("DELETE", "/ufmRest/resources/pkeys/0x5") in ufm.requests


def test_keyword_members_are_refused_before_any_write(fabric, ufm):
    changes.set_partition(SYSTEM, OPERATOR, fabric, name="all", pkey=6, members=["ALL_CAS"])
    change = push(fabric)
    assert change.status == "failed" and "UFM takes port GUIDs" in change.error
    assert [r for r in ufm.requests if r[0] != "GET"] == []


def test_port_admin_through_ufm_actions_is_read_back(fabric, ufm):
    PortAdminState.objects.create(fabric=fabric, switch="leaf1", port=2, enabled=False)
    change = push(fabric)
    assert change.status == "applied", change.error
    assert change.steps.get(name="port-admin").target == "leaf1[2]"
    assert [p for p in ufm.ports if p["name"].endswith("_2")][0]["physical_state"] == "Disabled"


def test_wrong_credentials_fail_the_change_precisely(make_fabric, ufm):
    fabric = make_fabric("ufm-bad", driver="ufm", url=ufm.url, username="admin", password_env="NO_SUCH_ENV")
    change = push(fabric)
    assert change.status == "failed" and "HTTP 401" in change.error


def test_client_speaks_the_documented_contract(ufm):
    client = UfmClient(ufm.url, username="admin", password="secret")
    assert "ufm_release_version" in client.version()
    with pytest.raises(UfmError, match="HTTP 400"):
        client.request("POST", "/ufmRest/resources/pkeys", {"pkey": "0x7fff", "guids": [HCAS[0]]})
    with pytest.raises(UfmError, match="HTTP 400"):
        client.request("PUT", "/ufmRest/resources/pkeys", {"pkey": "0x3", "guids": ["0x12"], "membership": "full"})
    driver = UfmDriver(client)
    assert driver.read_applied() == {"ufm-pkeys.json": "{}\n"}
