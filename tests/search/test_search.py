"""Search over a designed fabric with two tenants' ready reservations (no lab): the operator
finds GUIDs, LIDs, P_Keys, reservations, switches, cables, designs and tenants; a tenant finds its
own reservation and nodes and nothing of the other tenant's."""

from __future__ import annotations

import pytest

from console.fabric.models import DiscoveryRun
from console.telemetry.search import search
from console.tenancy.models import Principal, Role
from scheduling.models import HCA, ReservationAllocation

OPERATOR = Principal(None, Role.OPERATOR, None)


@pytest.fixture
def found(world):
    """Tenant A's reservation named, one of its HCAs and a LID recorded by a discovery run."""
    res = world["res_a"]
    res.name = "llama-pretrain-7"
    res.save(update_fields=["name"])
    node = ReservationAllocation.objects.filter(reservation=res).select_related("node").first().node
    hca = HCA.objects.filter(node=node).order_by("index").first()
    topology = {
        "nodes": [
            {"name": node.name, "kind": "ca", "guid": hca.port_guid, "lids": {"1": 377}, "known": True},
            # a CA whose NodeDescription is Linux's default: the host name, a space, the device
            {"name": f"{node.name} mlx5_1", "kind": "ca", "guid": "0x0002c90300aa0002", "lids": {"1": 378}},
            {"name": "leaf-su1-r1", "kind": "switch", "guid": "0x0002c90300ffee01", "lid": 5, "known": True},
        ]
    }
    DiscoveryRun.objects.create(fabric=world["fabric"], topology=topology)
    return {**world, "res": res, "node": node, "hca": hca}


def tenant(world, key):
    return Principal(None, Role.TENANT_MEMBER, world[key].pk)


def labels(results, kind=None):
    return {r["label"] for r in results if kind is None or r["kind"] == kind}


def colons(guid: str) -> str:
    digits = guid[2:]
    return ":".join(digits[i : i + 2] for i in range(0, 16, 2)).upper()


def test_operator_finds_a_port_guid_in_any_spelling(found):
    guid = found["hca"].port_guid
    for spelled in (guid, guid[2:].upper(), colons(guid)):
        hits = [r for r in search(OPERATOR, spelled) if r["kind"] == "node"]
        assert [h["label"] for h in hits] == [found["node"].name], spelled
        assert hits[0]["fields"]["port_guid"] == guid.lower()
        assert hits[0]["url"] == f"/fabrics/{found['fabric'].pk}/"


def test_operator_finds_a_lid_explicit_or_bare(found):
    assert labels(search(OPERATOR, "lid:377")) == {found["node"].name}
    assert found["node"].name in labels(search(OPERATOR, "377"), "node")
    (switch,) = [r for r in search(OPERATOR, "lid:5") if r["kind"] == "switch"]
    assert switch["label"] == "leaf-su1-r1" and switch["fields"]["lid"] == 5


def test_operator_finds_a_pkey_with_or_without_the_membership_bit(found):
    pkey = found["res"].pkey
    for spelled in (f"{pkey | 0x8000:#06x}", f"{pkey:#06x}"):
        assert "llama-pretrain-7" in labels(search(OPERATOR, spelled), "reservation"), spelled


def test_operator_finds_reservations_by_name_and_id_with_their_tenant(found):
    (hit,) = [r for r in search(OPERATOR, "LLAMA-pre") if r["kind"] == "reservation"]
    assert hit["url"] == f"/reservations/{found['res'].pk}/"
    assert hit["fields"]["tenant"] == found["a"].name
    assert "llama-pretrain-7" in labels(search(OPERATOR, str(found["res"].pk)), "reservation")


def test_operator_finds_switches_cables_designs_and_tenants(found):
    fabric = found["fabric"]
    switches = labels(search(OPERATOR, "leaf"), "switch")
    assert switches, "the design's leaves are found by name"
    leaf = sorted(switches)[0]
    (cable,) = search(OPERATOR, f"{leaf}[1]")
    assert cable["kind"] == "cable" and cable["fields"]["peer"]
    assert cable["url"] == f"/fabrics/{fabric.pk}/live/?switch={leaf}"
    assert fabric.revision.design.name in labels(search(OPERATOR, fabric.revision.design.name), "design")
    assert found["b"].name in labels(search(OPERATOR, found["b"].name), "tenant")


def test_the_owning_tenant_finds_its_reservation_and_node(found):
    me = tenant(found, "a")
    (res,) = [r for r in search(me, "llama") if r["kind"] == "reservation"]
    assert "tenant" not in res["fields"]
    assert found["node"].name in labels(search(me, found["hca"].port_guid), "node")
    assert found["node"].name in labels(search(me, "lid:377"), "node")
    assert "llama-pretrain-7" in labels(search(me, f"{found['res'].pkey | 0x8000:#06x}"))
    node_hits = [r for r in search(me, found["node"].name) if r["kind"] == "node"]
    assert node_hits and node_hits[0]["url"] == f"/reservations/{found['res'].pk}/"


def test_a_tenant_finds_its_node_by_the_lid_of_a_ca_described_host_then_device(found):
    assert labels(search(tenant(found, "a"), "lid:378"), "node") == {found["node"].name}
    assert search(tenant(found, "b"), "lid:378") == []


def test_the_other_tenant_finds_nothing_of_them(found):
    other = tenant(found, "b")
    guid = found["hca"].port_guid
    queries = [
        guid,
        colons(guid),
        "lid:377",
        "377",
        "lid:5",
        f"{found['res'].pkey | 0x8000:#06x}",
        f"{found['res'].pkey:#06x}",
        "llama",
        str(found["res"].pk),
        found["node"].name,
        found["a"].name,
        "leaf",
        found["fabric"].revision.design.name,
    ]
    for q in queries:
        assert search(other, q) == [], q
    # Its own reservation it does find, so the empty answers above are scoping, not a broken search.
    assert labels(search(other, str(found["res_b"].pk)), "reservation")


def test_the_api_and_the_page(found, client_for, session_client_for, operator, member_b):
    body = client_for(operator).get("/api/search/", {"q": "llama"}).json()
    assert body["q"] == "llama"
    (hit,) = [r for r in body["results"] if r["kind"] == "reservation"]
    assert set(hit) == {"kind", "label", "url", "fields"}
    assert client_for(member_b).get("/api/search/", {"q": "llama"}).json()["results"] == []
    page = session_client_for(operator).get("/search/", {"q": found["hca"].port_guid})
    assert page.status_code == 200 and found["node"].name in page.content.decode()
    page_b = session_client_for(member_b).get("/search/", {"q": found["hca"].port_guid}).content.decode()
    assert found["node"].name not in page_b and "Nothing found" in page_b


def test_a_nul_character_is_a_bad_query_not_a_server_error(found, client_for, session_client_for, operator):
    # PostgreSQL text cannot hold NUL (schemathesis found the 500)
    answer = client_for(operator).get("/api/search/", {"q": "lla\x00ma"})
    assert answer.status_code == 400 and "q" in answer.json()["fields"], answer.content
    assert session_client_for(operator).get("/search/", {"q": "lla\x00ma"}).status_code in (200, 400)


def test_an_anonymous_user_is_sent_to_log_in(client):
    assert client.get("/search/", {"q": "x"}).status_code == 302
    assert client.get("/api/search/", {"q": "x"}).status_code in (401, 403)
