"""Real UFM clients against a live console on the lab (OpenSM on ibsim), P_Keys read from the wire.

A uvicorn console and a Celery worker run as subprocesses on this test's database; the 1-SU lab
runs OpenSM on ibsim. Clients used unchanged: networking-mlnx-baremetal's ``ufmclient`` (PyPI),
and the request sequence of NVIDIA ib-kubernetes's UFM plugin (pkg/sm/plugins/ufm/ufm.go) with its
exact bodies. After every step the P_Key tables of the ports are read with ``smpquery pkeys``
from this test process, not through the console.
"""

from __future__ import annotations

import json

import pytest
import requests
from networking_mlnx_baremetal.ufmclient import exceptions as ufm_exceptions
from networking_mlnx_baremetal.ufmclient.client import UfmClient

from console.fabric.models import ChangeRequest
from console.tenancy.models import Role
from scheduling.services import inventory
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import ACTOR, lab_data_dir, lab_fabric, su1_revision  # noqa: F401  (fixtures)
from tests.fabric.test_worker_crash import workers  # noqa: F401  (fixture)
from tests.servers import processes, web  # noqa: F401  (fixture)

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(600), pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-12345678"


def memberships(lab, pkey: int, guids: list[int]) -> dict[int, str | None]:
    """Membership of ``pkey`` in each port's P_Key table, read with ``smpquery pkeys``."""
    diags = lab.diags(timeout=20)
    cas = (n for n in diags.ibnetdiscover().nodes.values() if not n.is_switch)
    lid_of = {n.guid + 1: n.lid for n in cas if n.guid is not None}  # ibsim: port 1 = node GUID + 1
    return {guid: diags.pkeys(lid_of[guid]).membership(pkey) for guid in guids}


@pytest.fixture
def console(lab_fabric, workers, processes, make_user, monkeypatch):  # noqa: F811
    """The lab fabric with its inventory, an operator, a worker and a live console serving it."""
    fabric, lab = lab_fabric("ufm")
    inventory.import_inventory(fabric, actor=ACTOR)
    make_user("op", Role.OPERATOR)
    monkeypatch.setenv("CONSOLE_UFM_FABRIC", fabric.name)
    workers("ufm")
    return fabric, lab, web(processes)


def host_guids(url: str, auth: tuple[str, str], count: int) -> list[int]:
    """Port GUIDs of the first hosts, found as a client finds them: systems, then their ports."""
    systems = requests.get(f"{url}/ufmRest/resources/systems", auth=auth, timeout=30).json()
    found: list[int] = []
    for system in systems:
        ports = requests.get(
            f"{url}/ufmRest/resources/ports", params={"system": system["system_name"]}, auth=auth, timeout=30
        ).json()
        assert {p["system_name"] for p in ports} == {system["system_name"]}
        found += [int(p["guid"], 16) for p in ports]
        if len(found) >= count:
            return found[:count]
    raise AssertionError("not enough host ports")


def test_networking_mlnx_baremetal_ufmclient_drives_pkeys_on_the_wire(console):
    fabric, lab, url = console
    g1, g2, g3 = host_guids(url, ("op", PASSWORD), 3)
    client = UfmClient(url, "op", PASSWORD, False, timeout=180)
    pkey, key = "0x2a", 0x2A

    # add: three spellings of GUIDs (UFM's 16 hex, 0x-prefixed, colon-separated)
    colon = ":".join(f"{g2:016x}"[i : i + 2] for i in range(0, 16, 2))
    client.pkey.add_guids(pkey, [f"{g1:016x}", colon])
    assert memberships(lab, key, [g1, g2, g3]) == {g1: "full", g2: "full", g3: None}
    changes_after_add = ChangeRequest.objects.filter(fabric=fabric).count()

    # list and get, as the client asks (guids_data=True, Python's spelling)
    listed = client.pkey.list(with_guid=True)
    assert listed[pkey]["partition"] == "api_pkey_0x2a" and listed[pkey]["ip_over_ib"] is True
    expected = sorted([{"guid": f"{g:016x}", "membership": "full", "index0": False} for g in (g1, g2)], key=str)
    assert sorted(listed[pkey]["guids"], key=str) == expected
    assert client.pkey.get(pkey, with_guid=True)["guids"] == sorted(expected, key=lambda e: e["guid"])
    assert "guids" not in client.pkey.get(pkey)

    # an idempotent repeat: no new change, the wire unchanged
    client.pkey.add_guids(pkey, [f"0x{g1:016x}"])
    assert ChangeRequest.objects.filter(fabric=fabric).count() == changes_after_add

    # set: exactly g2 and g3, limited
    client.pkey.update(pkey, [f"{g2:016x}", f"{g3:016x}"], full_membership=False)
    assert memberships(lab, key, [g1, g2, g3]) == {g1: None, g2: "limited", g3: "limited"}

    # remove GUIDs
    client.pkey.remove_guids(pkey, [f"{g3:016x}"])
    assert memberships(lab, key, [g1, g2, g3]) == {g1: None, g2: "limited", g3: None}

    # delete, then it is gone for the client too
    client.pkey.delete(pkey)
    assert memberships(lab, key, [g1, g2, g3]) == {g1: None, g2: None, g3: None}
    with pytest.raises(ufm_exceptions.ResourceNotFoundError):
        client.pkey.get(pkey)
    with pytest.raises(ufm_exceptions.ResourceNotFoundError):
        client.pkey.delete(pkey)
    with pytest.raises(ufm_exceptions.AccessError):
        UfmClient(url, "op", "wrong-password", False).pkey.list()
    # every mutation was a change request, verified on the wire
    statuses = set(ChangeRequest.objects.filter(fabric=fabric).values_list("status", flat=True))
    assert statuses == {ChangeRequest.Status.APPLIED}


def test_ib_kubernetes_ufm_plugin_request_sequence(console):
    fabric, lab, url = console
    auth = ("op", PASSWORD)
    guids = host_guids(url, auth, 4)
    pkey = 0x0A2B
    headers = {"Content-Type": "application/json; charset=utf-8"}
    # ib-kubernetes sends GUIDs as net.HardwareAddr strings with the colons removed
    quoted = ",".join(f'"{g:016x}"' for g in guids)

    # Validate(): GET ufm_version, 200 expected
    assert requests.get(f"{url}/ufmRest/app/ufm_version", auth=auth, timeout=30).status_code == 200

    # AddGuidsToPKey(): its exact body
    body = f'{{"pkey": "0x{pkey:04X}", "index0": true, "ip_over_ib": true, "membership": "full", "guids": [{quoted}]}}'
    r = requests.post(f"{url}/ufmRest/resources/pkeys", data=body.encode(), headers=headers, auth=auth, timeout=180)
    assert r.status_code == 200, r.text
    assert set(memberships(lab, pkey, guids).values()) == {"full"}

    # ListGuidsInUse(): GET with the trailing slash; parsed as map[string]{guids:[{guid}]}
    r = requests.get(f"{url}/ufmRest/resources/pkeys/?guids_data=true", auth=auth, timeout=30)
    assert r.status_code == 200
    in_use = {
        ":".join(g["guid"][i : i + 2] for i in range(0, len(g["guid"]), 2)): key
        for key, data in json.loads(r.text).items()
        for g in data["guids"]
    }
    assert {k: v for k, v in in_use.items() if v == f"{pkey:#x}"} == {
        ":".join(f"{g:016x}"[i : i + 2] for i in range(0, 16, 2)): f"{pkey:#x}" for g in guids
    }

    # RemoveGuidsFromPKey(): two of the four
    body = f'{{"pkey": "0x{pkey:04X}", "guids": [{",".join(f"{chr(34)}{g:016x}{chr(34)}" for g in guids[:2])}]}}'
    r = requests.post(
        f"{url}/ufmRest/actions/remove_guids_from_pkey", data=body.encode(), headers=headers, auth=auth, timeout=180
    )
    assert r.status_code == 200, r.text
    assert memberships(lab, pkey, guids) == {guids[0]: None, guids[1]: None, guids[2]: "full", guids[3]: "full"}

    # the same removal again: idempotent, 200, nothing changes on the wire
    r = requests.post(
        f"{url}/ufmRest/actions/remove_guids_from_pkey", data=body.encode(), headers=headers, auth=auth, timeout=180
    )
    assert r.status_code == 200, r.text
    assert memberships(lab, pkey, guids)[guids[2]] == "full"
