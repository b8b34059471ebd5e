"""The ufm driver through the same change pipeline, against ``UfmContractFake`` (a contract fake
of UFM's documented PKey GUIDs, ports, version and actions endpoints and SHARP reservation reads,
emulating SHARP AM's ``reservation_auto_by_pkeys`` — not UFM itself).

SHARP: a partition whose owner holds SHARP trees (``sharp`` on its request) adds a ``sharp`` step
after ``verify``: UFM must list a SHARP reservation for its P_Key with exactly its member GUIDs, or
the change rolls back like a P_Key mismatch. Partitions without SHARP never call the SHARP API."""

from __future__ import annotations

import pytest

from console.fabric import changes, hooks
from console.fabric.changes.pipeline import apply_change
from console.fabric.drivers.ufm import UfmClient, UfmDriver, UfmError
from console.fabric.drivers.ufm_sharp import ALLOCATE_RESOURCES
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


# --- SHARP -------------------------------------------------------------------------------------


def reservation(monkeypatch, *, sharp: bool, hosts: list[str], pkey: int = 0x0012) -> None:
    """A reservation partition as scheduling requests it (a provider standing in for scheduling's)."""
    request = {
        "reservation_id": 12,
        "tenant_id": 1,
        "name": "res-12",
        "pkey": pkey,
        "sl": 0,
        "members": [[f"0x{g}", "full"] for g in hosts],
    }
    if sharp:
        request["sharp"] = True
    monkeypatch.setitem(hooks.registry.partitions_providers, "scheduling", lambda fabric_id: [request])


def sharp_calls(ufm) -> list[tuple[str, str]]:
    return [r for r in ufm.requests if r[1].startswith("/ufmRest/app/sharp")]


def test_a_sharp_reservation_is_verified_against_ufms_sharp_reservation(fabric, ufm, monkeypatch):
    hosts = HCAS[4:12]
    reservation(monkeypatch, sharp=True, hosts=hosts)
    change = push(fabric)
    assert change.status == "applied", (change.error, list(change.steps.values("name", "log")))
    assert [s.name for s in change.steps.all()] == ["plan", "render", "lint", "apply", "verify", "sharp"]
    assert change.steps.get(name="sharp").status == "ok"
    # what UFM's SHARP reports for the P_Key is the reservation's hosts' port GUIDs, 0x-prefixed
    (found,) = [
        v
        for v in UfmClient(ufm.url, username="admin", password="secret").request("GET", ALLOCATE_RESOURCES).values()
        if v["pkey"] == "0x12"
    ]
    assert sorted(found["guids"]) == sorted(f"0x{g}" for g in hosts)
    assert ("GET", ALLOCATE_RESOURCES) in sharp_calls(ufm)


def test_ufm_without_sharp_fails_the_push_and_rolls_it_back(fabric, ufm, monkeypatch):
    ufm.sharp_enabled = False
    reservation(monkeypatch, sharp=True, hosts=HCAS[:4])
    change = push(fabric)
    assert change.status == "rolled_back"
    assert "P_Key 0x0012: no SHARP reservation in UFM" in change.error and "SHARP is not ready" in change.error
    assert change.steps.get(name="sharp").status == "failed"
    assert change.steps.get(name="rollback").status == "ok"
    assert 0x12 not in ufm.pkeys  # the partition went back with it


def test_sharp_reservation_with_other_guids_is_a_mismatch(fabric, ufm, monkeypatch):
    hosts = HCAS[:4]
    reservation(monkeypatch, sharp=True, hosts=hosts)
    real = ufm.sharp_reservations

    def stale() -> dict:  # SHARP AM still holding the P_Key's previous GUIDs
        out = real()
        for value in out.values():
            value["guids"] = value["guids"][:-1]
        return out

    monkeypatch.setattr(ufm, "sharp_reservations", stale)
    change = push(fabric)
    assert change.status == "rolled_back"
    assert f"SHARP reservation GUIDs differ (missing ['{hosts[-1]}']" in change.error


def test_a_reservation_without_sharp_makes_no_sharp_call(fabric, ufm, monkeypatch):
    reservation(monkeypatch, sharp=False, hosts=HCAS[:4])
    ufm.sharp_enabled = False  # would fail any SHARP check
    change = push(fabric)
    assert change.status == "applied", change.error
    assert "sharp" not in [s.name for s in change.steps.all()]
    assert sharp_calls(ufm) == []


def test_fake_emulates_reservation_auto_by_pkeys(ufm):
    client = UfmClient(ufm.url, username="admin", password="secret")
    assert client.request("GET", ALLOCATE_RESOURCES) == {}
    client.request("POST", "/ufmRest/resources/pkeys/add", {"pkey": "0x5", "partition_name": "p5"})
    assert client.request("GET", ALLOCATE_RESOURCES) == {}  # a P_Key without GUIDs has no reservation
    client.request("PUT", "/ufmRest/resources/pkeys", {"pkey": "0x5", "guids": [HCAS[1], HCAS[0]]})
    every = client.request("GET", ALLOCATE_RESOURCES)
    assert list(every.values()) == [{"pkey": "0x5", "guids": [f"0x{HCAS[0]}", f"0x{HCAS[1]}"]}]
    (app_id,) = every
    assert client.request("GET", f"{ALLOCATE_RESOURCES}/{app_id}") == every[app_id]
    with pytest.raises(UfmError, match="HTTP 404"):
        client.request("GET", f"{ALLOCATE_RESOURCES}/no-such-app")
    ufm.sharp_enabled = False
    assert client.request("GET", ALLOCATE_RESOURCES) == {}
    with pytest.raises(UfmError, match="HTTP 404"):
        client.request("GET", f"{ALLOCATE_RESOURCES}/{app_id}")
