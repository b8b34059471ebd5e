"""Real UFM clients against a live console on the lab (OpenSM on ibsim), P_Keys read from the wire.

A uvicorn console and a Celery worker run as subprocesses on this test's database; the 1-SU lab
runs OpenSM on ibsim. Clients used unchanged: networking-mlnx-baremetal's ``ufmclient`` (PyPI),
and the request sequence of NVIDIA ib-kubernetes's UFM plugin (pkg/sm/plugins/ufm/ufm.go) with its
exact bodies. After every step the P_Key tables of the ports are read with ``smpquery pkeys``
from this test process, not through the console.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
import requests
from networking_mlnx_baremetal.ufmclient import exceptions as ufm_exceptions
from networking_mlnx_baremetal.ufmclient.client import UfmClient

from console.fabric.diags.parsers import PkeyTable
from console.fabric.models import ChangeRequest
from console.fabric.opensm.partitions import parse_partitions
from console.fabric.services import vguid_range
from console.tenancy.models import Principal, Role
from scheduling.models import HCA, Reservation
from scheduling.services import inventory, quotas
from scheduling.services.reservations import ReservationRequest, reserve
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import (  # noqa: F401  (fixtures)
    ACTOR,
    lab_data_dir,
    lab_fabric,
    su1_revision,
    whole_lab_pool,
)
from tests.fabric.pipeline_fixtures import wait_for
from tests.fabric.test_worker_crash import workers  # noqa: F401  (fixture)
from tests.servers import processes, web  # noqa: F401  (fixture)

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(600), pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-12345678"
OPERATOR = Principal(None, Role.OPERATOR, None)


def tables(lab, guids: list[int]) -> dict[int, PkeyTable]:
    """Each port's P_Key table, read with ``smpquery pkeys``."""
    diags = lab.diags(timeout=20)
    cas = (n for n in diags.ibnetdiscover().nodes.values() if not n.is_switch)
    lid_of = {n.guid + 1: n.lid for n in cas if n.guid is not None}  # ibsim: port 1 = node GUID + 1
    return {guid: diags.pkeys(lid_of[guid]) for guid in guids}


def memberships(lab, pkey: int, guids: list[int]) -> dict[int, str | None]:
    """Membership of ``pkey`` in each port's P_Key table, read with ``smpquery pkeys``."""
    return {guid: table.membership(pkey) for guid, table in tables(lab, guids).items()}


def at_index0(lab, guids: list[int]) -> dict[int, int | None]:
    """The P_Key (15 bits) at index 0 of each port's table."""
    return {g: next((e.pkey for e in t.entries if e.index == 0), None) for g, t in tables(lab, guids).items()}


def colon(guid: int) -> str:
    return ":".join(f"{guid:016x}"[i : i + 2] for i in range(0, 16, 2))


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
    client.pkey.add_guids(pkey, [f"{g1:016x}", colon])  # ufmclient sends index0: true by default
    assert memberships(lab, key, [g1, g2, g3]) == {g1: "full", g2: "full", g3: None}
    assert at_index0(lab, [g1, g2]) == {g1: key, g2: key}
    changes_after_add = ChangeRequest.objects.filter(fabric=fabric).count()

    # list and get, as the client asks (guids_data=True, Python's spelling)
    listed = client.pkey.list(with_guid=True)
    assert listed[pkey]["partition"] == "api_pkey_0x2a" and listed[pkey]["ip_over_ib"] is True
    expected = sorted([{"guid": f"{g:016x}", "membership": "full", "index0": True} for g in (g1, g2)], key=str)
    assert sorted(listed[pkey]["guids"], key=str) == expected
    assert client.pkey.get(pkey, with_guid=True)["guids"] == sorted(expected, key=lambda e: e["guid"])
    assert "guids" not in client.pkey.get(pkey)

    # an idempotent repeat: no new change, the wire unchanged
    client.pkey.add_guids(pkey, [f"0x{g1:016x}"])
    assert ChangeRequest.objects.filter(fabric=fabric).count() == changes_after_add

    # set: exactly g2 and g3, limited
    client.pkey.update(pkey, [f"{g2:016x}", f"{g3:016x}"], full_membership=False)
    assert memberships(lab, key, [g1, g2, g3]) == {g1: None, g2: "limited", g3: "limited"}
    assert client.pkey.get(pkey)["index0"] is False  # update sends index0: false, PUT sets it as sent

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
    # index0: true is OpenSM's indx0: the P_Key sits at index 0 of each member's table, read on the wire
    assert at_index0(lab, guids) == dict.fromkeys(guids, pkey)

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


def test_a_reservation_pkey_takes_only_its_own_hosts_and_survives_every_removal(console, tenant_a, tenant_b, make_user):
    fabric, lab, url = console
    member_a = make_user("member-a", Role.TENANT_MEMBER, tenant_a)
    make_user("member-b", Role.TENANT_MEMBER, tenant_b)
    pool = whole_lab_pool(fabric)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    request = ReservationRequest(pool_id=pool.pk, gpus=16, duration=dt.timedelta(hours=1), tenant_id=tenant_a.pk)
    res = reserve(ACTOR, Principal(member_a.pk, Role.TENANT_MEMBER, tenant_a.pk), request)  # member-a's
    # the worker reconciles and pushes the reservation's partition
    wait_for(lambda: Reservation.objects.get(pk=res.pk).status == Reservation.Status.READY, timeout=240)
    res.refresh_from_db()
    key = f"0x{res.pkey:04X}"
    hosts = sorted(
        int(g, 16)
        for g in HCA.objects.filter(node__in=res.allocations.values("node")).values_list("port_guid", flat=True)
    )
    foreign = int(HCA.objects.exclude(port_guid__in=[f"0x{g:016x}" for g in hosts]).first().port_guid, 16)
    a, b, op = ("member-a", PASSWORD), ("member-b", PASSWORD), ("op", PASSWORD)

    def post(path: str, guids: list[int], auth: tuple[str, str]) -> requests.Response:
        quoted = ",".join(f'"{g:016x}"' for g in guids)
        body = f'{{"pkey": "{key}", "index0": true, "ip_over_ib": true, "membership": "full", "guids": [{quoted}]}}'
        return requests.post(
            f"{url}{path}", data=body, auth=auth, timeout=180, headers={"Content-Type": "application/json"}
        )

    def on_wire() -> dict[int, str | None]:
        return memberships(lab, res.pkey, [*hosts[:2], foreign])

    assert on_wire() == {hosts[0]: "full", hosts[1]: "full", foreign: None}
    # its tenant adds its own hosts (an ib-kubernetes call): 200, nothing to change
    assert post("/ufmRest/resources/pkeys", hosts[:2], a).status_code == 200
    # a GUID of another host, by the tenant or by an operator: 403, not on the wire
    for auth in (a, op):
        r = post("/ufmRest/resources/pkeys", [foreign], auth)
        assert r.status_code == 403 and f"{foreign:016x}" in r.json()["error"]
    # another tenant: the P_Key does not exist for it
    assert post("/ufmRest/resources/pkeys", hosts[:1], b).status_code == 404
    assert requests.get(f"{url}/ufmRest/resources/pkeys/{key}", auth=b, timeout=30).status_code == 404
    # nobody removes its hosts or deletes it
    for auth in (a, op):
        assert post("/ufmRest/actions/remove_guids_from_pkey", hosts[:1], auth).status_code == 403
        assert requests.delete(f"{url}/ufmRest/resources/pkeys/{key}", auth=auth, timeout=30).status_code == 403
    assert on_wire() == {hosts[0]: "full", hosts[1]: "full", foreign: None}
    assert Reservation.objects.get(pk=res.pk).status == Reservation.Status.READY

    # pod VFs: two GUIDs of the reservation's vGUID range (ib-kubernetes's pool), added by its tenant
    # through the real ufmclient (16 hex digits and colon-separated)
    owned = vguid_range(res.pk)
    vf1, vf2, outside = owned.first + 1, owned.first + 2, owned.last + 1
    before = {g: t.entries for g, t in tables(lab, hosts).items()}
    client_a = UfmClient(url, "member-a", PASSWORD, False, timeout=180)
    client_a.pkey.add_guids(key, [f"{vf1:016x}", colon(vf2)])
    listed = client_a.pkey.get(key, with_guid=True)["guids"]
    assert {g["guid"] for g in listed} == {f"{g:016x}" for g in [*hosts, vf1, vf2]}
    # they are members in the partitions.conf OpenSM reads (the file itself, parsed independently)
    live = parse_partitions((lab.workdir / "opensm" / "partitions.conf").read_text())
    (mine,) = [p for p in live if p.pkey == res.pkey]
    assert {vf1, vf2} <= {m.port for m in mine.members}
    # an operator, or the tenant with a GUID outside its range: 403 in UFM's shape
    assert post("/ufmRest/resources/pkeys", [vf1 + 2], op).status_code == 403
    r = post("/ufmRest/resources/pkeys", [outside], a)
    assert r.status_code == 403 and set(r.json()) == {"error"} and f"{outside:016x}" in r.json()["error"]
    # another tenant: A's P_Key does not exist for it (404, as every other tenant's object)
    assert post("/ufmRest/resources/pkeys", [vf1 + 3], b).status_code == 404
    # the tenant removes one VF; its hosts' GUIDs cannot be removed, even together with a VF
    with pytest.raises(ufm_exceptions.UfmClientError):
        client_a.pkey.remove_guids(key, [f"{vf2:016x}", f"{hosts[0]:016x}"])
    client_a.pkey.remove_guids(key, [f"{vf2:016x}"])
    listed = {g["guid"] for g in client_a.pkey.get(key, with_guid=True)["guids"]}
    assert f"{vf1:016x}" in listed and f"{vf2:016x}" not in listed
    # the hosts' P_Key tables are exactly as before the VF calls (smpquery pkeys)
    assert {g: t.entries for g, t in tables(lab, hosts).items()} == before
    assert Reservation.objects.get(pk=res.pk).virtual_guids == [[f"0x{vf1:016x}", "full"]]
    changes = ChangeRequest.objects.filter(fabric=fabric).order_by("-pk")[:2]
    assert {c.status for c in changes} == {ChangeRequest.Status.APPLIED}
