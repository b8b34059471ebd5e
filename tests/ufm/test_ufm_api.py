"""The /ufmRest/ API through Django's test client: authentication, UFM's error shapes and status
codes, protected reservation P_Keys, idempotent repeats, the inventory a client finds GUIDs in.

The fabric requires approval here, so a write ends at a pending change request (202) without a
worker; the lab tests (test_ufm_lab.py) push and verify on the wire.
"""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from rest_framework.test import APIClient

from console.fabric import changes
from console.fabric.models import ChangeRequest, FabricPartition
from console.fabric.services import vguid_range
from console.tenancy.models import AuditEntry, Principal, Role
from scheduling.models import HCA, Reservation
from scheduling.services import quotas
from scheduling.services.reservations import ReservationRequest, reserve
from tests.fabric.lab_fixtures import ACTOR, su1_revision, whole_lab_pool  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db
OPERATOR = Principal(None, Role.OPERATOR, None)
G1, G2 = "0002c90300000101", "0002c90300000102"


def basic(username: str, password: str = "pw-12345678") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(f"{username}:{password}".encode()).decode())
    return client


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Every Basic request checks a password: a cheap hasher here keeps these tests about the API
    (the lab tests keep the console's real hasher)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fabric(su1_revision):  # noqa: F811
    return changes.create_fabric(ACTOR, OPERATOR, name="ufm-f", revision=su1_revision, approval_required=True)


@pytest.fixture
def reservation(fabric, tenant_a, member_a) -> Reservation:
    """A 16-GPU reservation of tenant A (2 nodes, 16 HCA ports), waiting for the fabric."""
    pool = whole_lab_pool(fabric)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    request = ReservationRequest(pool_id=pool.pk, gpus=16, duration=dt.timedelta(hours=1), tenant_id=tenant_a.pk)
    res = reserve(ACTOR, Principal(member_a.pk, Role.TENANT_MEMBER, tenant_a.pk), request)
    assert res.pkey is not None and res.status in Reservation.HOLDING
    return res


def host_guids(res: Reservation) -> list[str]:
    nodes = res.allocations.values("node_id")
    return sorted(g[2:] for g in HCA.objects.filter(node_id__in=nodes).values_list("port_guid", flat=True))


def test_without_or_with_wrong_credentials_401_in_ufm_shape(fabric, operator):
    r = APIClient().get("/ufmRest/app/ufm_version")
    assert r.status_code == 401 and r["WWW-Authenticate"].startswith("Basic") and set(r.json()) == {"error"}
    r = basic("op", "wrong-password").get("/ufmRest/resources/pkeys")
    assert r.status_code == 401 and "error" in r.json()
    assert basic("nobody-at-all").get("/ufmRest/resources/pkeys").status_code == 401


def test_basic_and_bearer_credentials_both_work(fabric, operator, client_for):
    assert basic("op").get("/ufmRest/app/ufm_version").json()["ufm_release_version"]
    assert client_for(operator).get("/ufmRest/resources/pkeys").status_code == 200
    assert basic("op").get("/ufmRestV2/resources/pkeys/").json() == {}
    assert basic("op").get(f"/ufm/{fabric.name}/ufmRest/resources/pkeys").status_code == 200


def test_read_only_token_and_auditor_cannot_write(fabric, operator, auditor, client_for):
    body = {"pkey": "0x30", "guids": [G1]}
    r = client_for(operator, read_only=True).post("/ufmRest/resources/pkeys", body, format="json")
    assert (r.status_code, r.json()) == (403, {"error": "this token is read-only"})
    assert basic("aud").post("/ufmRest/resources/pkeys", body, format="json").status_code == 403
    assert not FabricPartition.objects.exists()


def test_errors_have_ufm_shape_and_status(fabric, operator):
    client = basic("op")
    r = client.get("/ufmRest/resources/pkeys/0x999")
    assert (r.status_code, r.json()) == (404, {"error": "pkey 0x999 not found"})
    r = client.post("/ufmRest/resources/pkeys", {"pkey": "0x30", "guids": ["nope"]}, format="json")
    assert r.status_code == 400 and "GUID 'nope'" in r.json()["error"]
    r = client.post("/ufmRest/resources/pkeys", {"pkey": "0x7fff", "guids": [G1]}, format="json")
    assert r.status_code == 400 and "management" in r.json()["error"]
    assert client.delete("/ufmRest/resources/pkeys/0x30").status_code == 404
    assert client.delete(f"/ufmRest/resources/pkeys/0x30/guids/{G1}").status_code == 404
    r = client.put("/ufmRest/resources/pkeys/qos_conf", {"pkey": "0x30", "service_level": 1}, format="json")
    assert r.status_code == 404 and "not part of" in r.json()["error"]
    assert client.get("/ufmRest/resources/links").status_code == 404
    assert client.patch("/ufmRest/resources/pkeys", {}, format="json").status_code == 405


def test_operator_add_is_an_audited_change_request_and_a_repeat_adds_nothing(fabric, operator):
    client = basic("op")
    body = {"pkey": "0x0A2B", "index0": True, "ip_over_ib": True, "membership": "full", "guids": [G1, f"0x{G2}"]}
    r = client.post("/ufmRest/resources/pkeys", body, format="json")
    change = ChangeRequest.objects.get(fabric=fabric)
    assert (r.status_code, r.json()) == (202, {"change_id": change.pk, "status": "pending_approval"})
    row = FabricPartition.objects.get(fabric=fabric, pkey=0x0A2B)
    assert (row.name, row.ipoib, row.members) == ("api_pkey_0xa2b", True, [[f"0x{G1}", "full"], [f"0x{G2}", "full"]])
    # index0 is OpenSM's indx0 flag of the partition definition
    assert row.indx0 and "api_pkey_0xa2b=0x0a2b, indx0, ipoib :" in change.artefacts["partitions.conf"]
    assert change.requested_by_label == "op"
    assert AuditEntry.objects.filter(action="fabric.partition.create").count() == 1
    # the same call again, GUIDs spelled differently: no second change, no second audit row
    body["guids"] = [":".join(G2[i : i + 2] for i in range(0, 16, 2)), G1]
    assert client.post("/ufmRest/resources/pkeys/", body, format="json").json()["change_id"] == change.pk
    assert ChangeRequest.objects.filter(fabric=fabric).count() == 1
    assert AuditEntry.objects.filter(action__startswith="fabric.partition.").count() == 1
    listed = client.get("/ufmRest/resources/pkeys?guids_data=true").json()
    assert listed == {
        "0xa2b": {
            "partition": "api_pkey_0xa2b",
            "ip_over_ib": True,
            "index0": True,
            "guids": [{"guid": g, "membership": "full", "index0": True} for g in (G1, G2)],
        }
    }
    assert client.get("/ufmRest/resources/pkeys").json() == {
        "0xa2b": {"partition": "api_pkey_0xa2b", "ip_over_ib": True, "index0": True}
    }
    # index0 false on a later add leaves the P_Key's flag; PUT sets it as sent
    body = {"pkey": "0x0A2B", "index0": False, "guids": [G1]}
    client.post("/ufmRest/resources/pkeys", body, format="json")
    assert FabricPartition.objects.get(pkey=0x0A2B).indx0
    client.put("/ufmRest/resources/pkeys", {"pkey": "0x0A2B", "index0": False, "guids": [G1, G2]}, format="json")
    assert not FabricPartition.objects.get(pkey=0x0A2B).indx0
    assert client.get("/ufmRest/resources/pkeys/0xa2b").json()["index0"] is False


def test_a_reservation_pkey_is_its_tenants_and_protected(fabric, reservation, operator, member_a, member_b):
    key, hosts = f"{reservation.pkey:#x}", host_guids(reservation)
    assert len(hosts) == 16
    a, b, op = basic("member-a"), basic("member-b"), basic("op")
    # the tenant sees it, with its hosts; another tenant does not, anywhere
    mine = a.get(f"/ufmRest/resources/pkeys/{key}?guids_data=true").json()
    assert mine["partition"] == reservation.partition_name and [g["guid"] for g in mine["guids"]] == hosts
    assert list(a.get("/ufmRest/resources/pkeys").json()) == [key]
    assert b.get("/ufmRest/resources/pkeys").json() == {}
    for r in (
        b.get(f"/ufmRest/resources/pkeys/{key}"),
        b.post("/ufmRest/resources/pkeys", {"pkey": key, "guids": hosts[:1]}, format="json"),
        b.delete(f"/ufmRest/resources/pkeys/{key}"),
    ):
        assert (r.status_code, r.json()) == (404, {"error": f"pkey {key} not found"})
    # its tenant may add its own hosts' GUIDs (members already: nothing to change) and nothing else
    before = ChangeRequest.objects.count()
    assert a.post("/ufmRest/resources/pkeys", {"pkey": key, "guids": hosts[:2]}, format="json").status_code == 200
    assert ChangeRequest.objects.count() == before
    foreign = HCA.objects.exclude(port_guid__in=[f"0x{g}" for g in hosts]).first().port_guid
    r = a.post("/ufmRest/resources/pkeys", {"pkey": key, "guids": [foreign]}, format="json")
    assert r.status_code == 403 and foreign[2:] in r.json()["error"]
    # nobody deletes it, sets it or removes its hosts through this API, operators included
    for client in (a, op):
        assert client.delete(f"/ufmRest/resources/pkeys/{key}").status_code == 403
        assert client.delete(f"/ufmRest/resources/pkeys/{key}/guids/{hosts[0]}").status_code == 403
        body = {"pkey": key, "guids": hosts[:1]}
        assert client.post("/ufmRest/actions/remove_guids_from_pkey", body, format="json").status_code == 403
        assert client.put("/ufmRest/resources/pkeys", body, format="json").status_code == 403
    assert ChangeRequest.objects.count() == before
    # a tenant changes no operator partition: for it, a P_Key of no reservation of its own does
    # not exist, another tenant's and a free one alike (a different answer would tell which
    # guessed keys are a neighbour's)
    free = "0x31"
    for k in (key, free):
        answers = {
            (r.status_code, r.json()["error"].replace(k, "K"))
            for r in (
                b.post("/ufmRest/resources/pkeys", {"pkey": k, "guids": hosts[:1]}, format="json"),
                b.put("/ufmRest/resources/pkeys", {"pkey": k, "guids": hosts[:1]}, format="json"),
                b.delete(f"/ufmRest/resources/pkeys/{k}"),
                b.delete(f"/ufmRest/resources/pkeys/{k}/guids/{hosts[0]}"),
                b.post("/ufmRest/resources/pkeys/add", {"pkey": k, "partition_name": "x"}, format="json"),
                b.get(f"/ufmRest/resources/pkeys/{k}"),
            )
        }
        assert answers == {(404, "pkey K not found")}, (k, answers)
    assert not FabricPartition.objects.exists()


def test_systems_and_ports_lead_a_client_to_a_hosts_guids(fabric, reservation, operator, member_a, member_b):
    systems = basic("op").get("/ufmRest/resources/systems").json()
    assert len(systems) == 32 and all(s["type"] == "host" and len(s["guids"]) == 8 for s in systems)
    held = sorted(basic("member-a").get("/ufmRest/resources/systems").json(), key=lambda s: s["system_name"])
    assert sorted(g for s in held for g in s["guids"]) == host_guids(reservation)
    assert basic("member-b").get("/ufmRest/resources/systems").json() == []
    name = held[0]["system_name"]
    ports = basic("member-a").get(f"/ufmRest/resources/ports?system={name}").json()
    assert sorted(p["guid"] for p in ports) == sorted(held[0]["guids"])
    assert {p["name"] for p in ports} == {f"{g}_1" for g in held[0]["guids"]}
    assert basic("member-b").get(f"/ufmRest/resources/ports?system={name}").json() == []


def test_a_browser_session_reads_json_and_cannot_write_without_csrf(fabric, reservation, member_a):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(member_a)
    r = client.get("/ufmRest/resources/pkeys", HTTP_ACCEPT="text/html")
    assert r["Content-Type"] == "application/json" and list(r.json()) == [f"{reservation.pkey:#x}"]
    r = client.post("/ufmRest/resources/pkeys", {"pkey": "0x31", "guids": [G1]}, format="json")
    assert r.status_code == 403 and "CSRF" in r.json()["error"]


def test_a_reservations_tenant_adds_and_removes_pod_vf_guids_of_its_own_range(
    fabric, reservation, operator, member_a, member_b, make_user, client_for
):
    member_a2 = make_user("member-a2", Role.TENANT_MEMBER, reservation.tenant)  # member-a's colleague
    key, hosts = f"{reservation.pkey:#x}", host_guids(reservation)
    owned = vguid_range(reservation.pk)
    vf1, vf2 = f"{owned.first + 7:016x}", f"{owned.first + 8:016x}"
    colon = ":".join(vf2[i : i + 2] for i in range(0, 16, 2))
    a, b, op = basic("member-a"), basic("member-b"), basic("op")
    # ib-kubernetes's body, its tenant's credentials: accepted (a change waits for approval here)
    body = {"pkey": key, "index0": True, "ip_over_ib": True, "membership": "full", "guids": [vf1, colon]}
    r = a.post("/ufmRest/resources/pkeys", body, format="json")
    assert r.status_code == 202, r.json()
    reservation.refresh_from_db()
    assert reservation.virtual_guids == [[f"0x{vf1}", "full"], [f"0x{vf2}", "full"]]
    assert AuditEntry.objects.filter(action="reservation.virtual_guids").count() == 1
    change = ChangeRequest.objects.get(pk=r.json()["change_id"])
    assert f"0x{vf1}=full" in change.artefacts["partitions.conf"]
    listed = a.get(f"/ufmRest/resources/pkeys/{key}?guids_data=true").json()
    assert [g["guid"] for g in listed["guids"]] == sorted([*hosts, vf1, vf2]) and listed["index0"] is False
    # an operator, another tenant's range, a GUID outside every range: 403; another tenant: 404
    other = f"{vguid_range(reservation.pk + 1).first:016x}"
    for client, guid in ((op, vf1), (a, other), (a, "0002c9030000ffff")):
        r = client.post("/ufmRest/resources/pkeys", {"pkey": key, "guids": [guid]}, format="json")
        assert r.status_code == 403 and set(r.json()) == {"error"}, r.json()
    assert b.post("/ufmRest/resources/pkeys", {"pkey": key, "guids": [vf1]}, format="json").status_code == 404
    # a colleague (another member of the tenant) may not, as the REST API refuses them the
    # reservation's release: one rule, one answer
    colleague = basic("member-a2")
    r = colleague.post("/ufmRest/resources/pkeys", {"pkey": key, "guids": [vf1]}, format="json")
    rest = client_for(member_a2).post(f"/api/reservations/{reservation.pk}/release/", {}, format="json")
    assert (r.status_code, rest.status_code) == (403, 403)
    assert (
        r.json()["error"]
        == rest.json()["detail"]
        == ("a tenant member changes only the reservations they made; ask a tenant admin")
    )
    r = colleague.delete(f"/ufmRest/resources/pkeys/{key}/guids/{vf1}")
    assert (
        r.status_code == 403 and reservation.virtual_guids == Reservation.objects.get(pk=reservation.pk).virtual_guids
    )
    # removal: its hosts' ports never (not even with a VF), its VFs by its tenant only
    mixed = {"pkey": key, "guids": [vf1, hosts[0]]}
    assert a.post("/ufmRest/actions/remove_guids_from_pkey", mixed, format="json").status_code == 403
    assert op.delete(f"/ufmRest/resources/pkeys/{key}/guids/{vf1}").status_code == 403
    assert b.delete(f"/ufmRest/resources/pkeys/{key}/guids/{vf1}").status_code == 404
    assert a.delete(f"/ufmRest/resources/pkeys/{key}/guids/{vf1}").status_code == 202
    reservation.refresh_from_db()
    assert reservation.virtual_guids == [[f"0x{vf2}", "full"]]
    assert a.delete(f"/ufmRest/resources/pkeys/{key}").status_code == 403


def test_another_sites_page_cannot_write_with_an_operators_basic_credentials(fabric, operator):
    """What a page on another site can make an operator's browser send (it holds the Basic
    credentials): a form post, a multipart post, or a fetch with the other site's Origin and
    ``Sec-Fetch-Site: cross-site``. None of them writes; a JSON client and the console's own
    origin still do."""
    client = basic("op")
    browser = {"HTTP_ORIGIN": "https://attacker.example", "HTTP_SEC_FETCH_SITE": "cross-site"}
    form = {"pkey": "0x35", "guids": G1}
    # the classic cross-site form: urlencoded, sent by the browser with the site's headers
    r = client.post(
        "/ufmRest/resources/pkeys", form, format=None, content_type="application/x-www-form-urlencoded", **browser
    )
    assert r.status_code == 403 and "cross-site" in r.json()["error"], r.content
    # the same without the Fetch metadata (an older browser): refused for its body type
    r = client.generic(
        "POST", "/ufmRest/resources/pkeys", "pkey=0x35&guids=" + G1, content_type="application/x-www-form-urlencoded"
    )
    assert r.status_code == 415 and "send JSON" in r.json()["error"], r.content
    r = client.post("/ufmRest/resources/pkeys", form)  # the test client's multipart
    assert r.status_code == 415, r.content
    r = client.generic("POST", "/ufmRest/resources/pkeys", "{}", content_type="text/plain")  # a no-preflight fetch
    assert r.status_code == 415, r.content
    # JSON from another origin (a CORS preflight would not stop a same-named header; the Origin does)
    body = {"pkey": "0x35", "guids": [G1]}
    r = client.post("/ufmRest/resources/pkeys", body, format="json", HTTP_ORIGIN="https://attacker.example")
    assert r.status_code == 403 and "Origin: https://attacker.example" in r.json()["error"]
    r = client.delete("/ufmRest/resources/pkeys/0x35", HTTP_SEC_FETCH_SITE="same-site")
    assert r.status_code == 403
    assert not FabricPartition.objects.filter(fabric=fabric, pkey=0x35).exists()
    assert not ChangeRequest.objects.filter(fabric=fabric).exists()
    # a JSON client, and the console's own page (same origin), write
    assert client.post("/ufmRest/resources/pkeys", body, format="json").status_code in (200, 202)
    own = {"HTTP_ORIGIN": "http://testserver", "HTTP_SEC_FETCH_SITE": "same-origin"}
    again = {"pkey": "0x36", "guids": [G2]}
    assert client.post("/ufmRest/resources/pkeys", again, format="json", **own).status_code in (200, 202)
    # reads are not writes: a cross-site GET answers as before (JSON, nothing changes)
    assert client.get("/ufmRest/resources/pkeys", **browser).status_code == 200


def test_wrong_basic_logins_lock_the_user_at_that_address_only_and_say_so_in_json(fabric, operator, settings):
    """The console's lockout rule (django-axes: the username and address pair) for Basic logins
    to /ufmRest/: after the limit the pair answers 429 in UFM's JSON shape, with Retry-After;
    the same operator from another address still gets in."""
    here = {"REMOTE_ADDR": "198.51.100.7"}
    codes = [
        basic("op", "wrong-password").get("/ufmRest/resources/pkeys", **here).status_code
        for _ in range(settings.AXES_FAILURE_LIMIT)
    ]
    assert set(codes[:-1]) == {401} and codes[-1] == 429  # (the limit-th failure locks)
    locked = basic("op").get("/ufmRest/resources/pkeys", **here)  # the right password, too late
    assert locked.status_code == 429 and locked["Content-Type"] == "application/json"
    assert locked.json()["error"].startswith("too many failed logins for this user from this address")
    assert int(locked["Retry-After"]) > 0
    assert basic("op").get("/ufmRest/resources/pkeys", REMOTE_ADDR="198.51.100.8").status_code == 200


def test_a_failed_changes_driver_detail_is_an_operators_a_tenant_gets_its_id(fabric, reservation, monkeypatch):
    from console.ufm import pkeys
    from console.ufm.wire import UfmError

    detail = "verify: port 0x0002c90300000999 (tenant B's host) shows 0x8042; /var/lib/opensm/partitions.conf"
    failed = ChangeRequest.objects.create(fabric=fabric, status=ChangeRequest.Status.FAILED, error=detail)
    monkeypatch.setattr(pkeys.changes, "request_change", lambda *a, **k: failed)
    monkeypatch.setattr(pkeys.changes, "reconcile", lambda *a, **k: failed)
    tenant = Principal(None, Role.TENANT_MEMBER, reservation.tenant_id)
    for principal, reservation_change in ((OPERATOR, False), (tenant, True)):
        with pytest.raises(UfmError) as refused:
            pkeys.push_and_wait(ACTOR, principal, fabric, "test", reservation=reservation_change)
        assert refused.value.status == 500
        said = refused.value.message
        if principal is OPERATOR:
            assert detail in said
        else:
            assert said == f"change {failed.pk} failed: an operator has the detail (change {failed.pk})"
            assert "0x0002c90300000999" not in said and "/var/lib" not in said
