"""Pools at several sites through the reserve path and the queue (issue 20).

Two small designs, two fabrics, two sites joined by an IB router, one pool holding both:

    site-a: fab-a, 16 DGX H100 (128 GPUs)  ==[IB router, 2,000 µs, 100 Gb/s]==  site-b: fab-b, the same

each a fat tree of 4 leaves (4 nodes each) under 2 spines.

No lab is needed: placement reads the inventory the designs expand into.
"""

from __future__ import annotations

import datetime as dt

import pytest

from console.fabric.models import Site, SiteLink
from console.tenancy.errors import Invalid
from scheduling.models import Dataset, Node, Reservation, ReservationAllocation
from scheduling.services import lifecycle, queue, reservations
from scheduling.services.topology import pool_topology
from tests.scheduling.conftest import (
    OPERATOR,
    SYSTEM,
    give_quota,
    make_fabric,
    make_pool,
    request_for,
    tenant_principal,
)

S = Reservation.Status
pytestmark = pytest.mark.django_db
SMALL = {"topology": "fat-tree", "nodes": 16, "node_type": "DGX-H100"}


@pytest.fixture
def sites(db):
    a = Site.objects.create(name="Site A", slug="site-a")
    b = Site.objects.create(name="Site B", slug="site-b")
    SiteLink.objects.create(a=a, b=b, kind="ib_router", latency_us=2000, bandwidth_gbps=100)
    return a, b


@pytest.fixture
def fabrics(sites):
    a, b = sites
    return make_fabric("fab-a", SMALL, site=a), make_fabric("fab-b", SMALL, site=b, pkey_min=0x2000, pkey_max=0x2FFF)


@pytest.fixture
def two_site_pool(fabrics):
    fab_a, fab_b = fabrics
    return make_pool(fab_a, "both", nodes=list(Node.objects.filter(fabric__in=[fab_a, fab_b])))


def reserve(tenant, pool, **kw) -> Reservation:
    return reservations.reserve(SYSTEM, tenant_principal(tenant), request_for(pool, **kw))


def reserve_asap(tenant, pool, **kw) -> Reservation:
    kw.setdefault("duration", dt.timedelta(hours=1))
    return queue.reserve_asap(SYSTEM, tenant_principal(tenant), request_for(pool, **kw))


def fabric_of_nodes(reservation: Reservation) -> set[str]:
    nodes = ReservationAllocation.objects.filter(reservation=reservation).values_list("node_id", flat=True)
    return set(Node.objects.filter(pk__in=nodes).values_list("fabric__name", flat=True))


def test_topology_of_a_two_fabric_pool_keeps_the_fabrics_apart(two_site_pool, fabrics):
    named = pool_topology(two_site_pool)
    topo = named.topology
    # 32 nodes, each tagged with its site; the two fabrics share no leaf, spine, leaf group or pod
    assert len(topo.nodes) == 32 and named.site_slugs == ("site-a", "site-b")
    by_site = {s: [n for n in topo.nodes if n.site == s] for s in (0, 1)}
    assert len(by_site[0]) == len(by_site[1]) == 16
    for kind in ("leaf_group", "pod"):
        assert {getattr(n, kind) for n in by_site[0]}.isdisjoint({getattr(n, kind) for n in by_site[1]})
    leaves = [{leaf for n in by_site[s] for leaf in n.rail_leaves} for s in (0, 1)]
    assert leaves[0].isdisjoint(leaves[1])
    spines = [{sp for leaf in leaves[s] for sp in topo.leaf_spines[leaf]} for s in (0, 1)]
    assert spines[0] and spines[1] and spines[0].isdisjoint(spines[1])
    # node_fabric names each node's fabric; names both designs use are qualified by fabric
    fab_a, fab_b = fabrics
    assert {named.node_fabric[n.id] for n in by_site[1]} == {fab_b.pk}
    assert "fab-b/node-001" in named.node_names and len(set(named.node_names)) == 32
    assert Node.objects.get(pk=named.node_pks[named.node_names.index("fab-b/node-001")]).fabric_id == fab_b.pk


def test_a_new_revision_of_the_second_fabric_is_a_new_topology(two_site_pool, fabrics):
    from designer import services as designer_services
    from tests.scheduling.conftest import OPERATOR

    before = pool_topology(two_site_pool)
    _, revision = designer_services.create_design(SYSTEM, OPERATOR, name="fab-b-2", options=SMALL)
    fabrics[1].revision = revision
    fabrics[1].save()
    assert pool_topology(two_site_pool) is not before


def test_near_site_b_lands_on_b_while_a_has_room(two_site_pool, tenant_a, fabrics):
    give_quota(tenant_a, two_site_pool, 128, 128)
    placed = reserve(tenant_a, two_site_pool, gpus=16, near="site-b")
    assert placed.status == S.PROVISIONING
    assert fabric_of_nodes(placed) == {"fab-b"} and placed.fabric_id == fabrics[1].pk
    assert placed.near_site.slug == "site-b"
    assert placed.placement["sites"] == ["site-b"]
    assert fabrics[1].pkey_min <= placed.pkey <= fabrics[1].pkey_max
    assert placed.explanation["site"]["rule"] == "nearest_now"
    assert placed.reason == "near site-b: site-b has room now, so it runs at site-b"
    # near a site by its name, any case, and without near: the home site (A) first
    assert fabric_of_nodes(reserve(tenant_a, two_site_pool, gpus=16, near="SITE B")) == {"fab-b"}
    assert fabric_of_nodes(reserve(tenant_a, two_site_pool, gpus=16)) == {"fab-a"}


def test_a_dataset_of_the_tenant_places_near_its_site(two_site_pool, tenant_a, sites):
    give_quota(tenant_a, two_site_pool, 128, 128)
    dataset = Dataset.objects.create(tenant=tenant_a, name="corpus", site=sites[1])
    placed = reserve(tenant_a, two_site_pool, gpus=8, near="dataset:corpus")
    assert fabric_of_nodes(placed) == {"fab-b"}
    assert placed.near_dataset_id == dataset.pk and placed.near_site_id == sites[1].pk


def test_another_tenants_dataset_is_unknown_and_not_named(two_site_pool, tenant_a, tenant_b, sites):
    give_quota(tenant_a, two_site_pool, 128, 128)
    Dataset.objects.create(tenant=tenant_b, name="secret-genomes", site=sites[1])
    with pytest.raises(Invalid) as theirs:
        reserve(tenant_a, two_site_pool, gpus=8, near="dataset:secret-genomes")
    with pytest.raises(Invalid) as missing:
        reserve(tenant_a, two_site_pool, gpus=8, near="dataset:no-such-thing")
    # the same answer whether it exists for another tenant or not at all, naming neither
    assert str(theirs.value) == str(missing.value)
    assert theirs.value.fields == missing.value.fields == {"near": ["unknown dataset"]}
    assert "secret-genomes" not in str(theirs.value) and "unknown dataset" in str(theirs.value)
    with pytest.raises(Invalid, match="unknown site"):
        reserve(tenant_a, two_site_pool, gpus=8, near="site-z")
    assert not Reservation.objects.exists()


def end_now(reservation: Reservation) -> None:
    """``reservation`` released now, through the lifecycle (its GPUs free from now on)."""
    lifecycle.release(SYSTEM, OPERATOR, reservation)


def fill_b(tenant, pool, hours: float = 2) -> Reservation:
    """Tenant ``tenant`` holds 14 of site B's 16 nodes for ``hours``."""
    return reserve(tenant, pool, nodes=14, near="site-b", duration=dt.timedelta(hours=hours))


def test_a_patient_request_waits_for_the_nearer_site(two_site_pool, tenant_a, tenant_b, fabrics):
    give_quota(tenant_a, two_site_pool, 128)
    give_quota(tenant_b, two_site_pool, 128)
    blocker = fill_b(tenant_b, two_site_pool)
    assert fabric_of_nodes(blocker) == {"fab-b"}
    # 4 nodes near B, which has 2 free until the blocker ends; A is empty; patience 3 h
    waiting = reserve_asap(tenant_a, two_site_pool, nodes=4, near="site-b", max_wait=dt.timedelta(hours=3))
    assert waiting.status == S.QUEUED
    assert waiting.fabric_id == fabrics[1].pk
    assert "site-b has room at" in waiting.reason and "within your patience of 3 h" in waiting.reason
    assert "so it waits for site-b rather than running now at site-a (latency 2,000 µs)" in waiting.reason
    assert waiting.explanation["site"]["rule"] == "nearer_later"
    # queued with its estimated start at B: when the blocker ends
    assert waiting.estimated_start is not None
    assert abs((waiting.estimated_start - blocker.end).total_seconds()) <= 60
    # when B frees, the queue places it at B
    end_now(blocker)
    queue.queue_pass(two_site_pool.pk)
    waiting.refresh_from_db()
    assert waiting.status == S.PROVISIONING and fabric_of_nodes(waiting) == {"fab-b"}
    assert waiting.placement["sites"] == ["site-b"] and waiting.explanation["site"]["site"] == "site-b"


def test_a_span_allowed_request_queued_for_the_nearer_site_stays_there(two_site_pool, tenant_a, tenant_b, fabrics):
    give_quota(tenant_a, two_site_pool, 128)
    give_quota(tenant_b, two_site_pool, 128)
    blocker = fill_b(tenant_b, two_site_pool)
    # it may span sites, but B frees within its patience: its site choice waits for B
    waiting = reserve_asap(
        tenant_a, two_site_pool, nodes=4, near="site-b", max_wait=dt.timedelta(hours=3), span_sites=True
    )
    assert waiting.status == S.QUEUED and waiting.span_sites
    assert waiting.explanation["site"]["rule"] == "nearer_later" and waiting.fabric_id == fabrics[1].pk
    assert "so it waits for site-b rather than running now at site-a" in waiting.reason
    # a queue pass while A is empty leaves it waiting for B, estimated when B frees
    queue.queue_pass(two_site_pool.pk)
    waiting.refresh_from_db()
    assert waiting.status == S.QUEUED, fabric_of_nodes(waiting)
    assert abs((waiting.estimated_start - blocker.end).total_seconds()) <= 60
    # when B frees, the queue places it at B, on one site
    end_now(blocker)
    queue.queue_pass(two_site_pool.pk)
    waiting.refresh_from_db()
    assert waiting.status == S.PROVISIONING and fabric_of_nodes(waiting) == {"fab-b"}
    assert "span" not in waiting.placement and waiting.explanation["site"]["rule"] == "nearer_later"


def test_an_impatient_request_runs_now_at_the_farther_site(two_site_pool, tenant_a, tenant_b, fabrics):
    give_quota(tenant_a, two_site_pool, 128)
    give_quota(tenant_b, two_site_pool, 128)
    fill_b(tenant_b, two_site_pool)
    placed = reserve_asap(tenant_a, two_site_pool, nodes=4, near="site-b", max_wait=dt.timedelta(minutes=10))
    assert placed.status == S.PROVISIONING
    assert fabric_of_nodes(placed) == {"fab-a"} and placed.fabric_id == fabrics[0].pk
    assert placed.explanation["site"]["rule"] == "farther_now"
    assert "site-b has room only at" in placed.reason and "beyond your patience of 10 min" in placed.reason
    assert "so it runs now at site-a (latency 2,000 µs) rather than waiting for site-b" in placed.reason


def test_preview_states_the_site_and_the_trade_off(two_site_pool, tenant_a, tenant_b):
    give_quota(tenant_a, two_site_pool, 128)
    give_quota(tenant_b, two_site_pool, 128)
    fill_b(tenant_b, two_site_pool)
    body = reservations.preview(tenant_principal(tenant_a), request_for(two_site_pool, nodes=4, near="site-b"))
    assert body["placeable"] and body["placement"]["sites"] == ["site-a"]
    assert body["site_choice"]["rule"] == "farther_now"
    assert "rather than waiting for site-b" in body["site_choice"]["message"]


def test_a_spanning_request_takes_both_sites_and_reports_the_ring_cost(two_site_pool, tenant_a, fabrics):
    give_quota(tenant_a, two_site_pool, 128, 128)
    # 24 nodes: no site holds them alone
    alone = reserve(tenant_a, two_site_pool, nodes=24, near="site-b")
    assert alone.status == S.REJECTED and "no site of the pool can hold it" in alone.explanation["site"]["message"]
    spanning = reserve(tenant_a, two_site_pool, nodes=24, near="site-b", span_sites=True)
    assert spanning.status == S.PROVISIONING and spanning.span_sites
    assert fabric_of_nodes(spanning) == {"fab-a", "fab-b"}
    assert sorted(spanning.placement["sites"]) == ["site-a", "site-b"]
    span = spanning.placement["span"]
    # filled nearest first (all of B's 16 nodes, then 8 at A), listed in ring order; two ring edges cross the router
    assert span["split"] == [{"site": "site-a", "nodes": 8}, {"site": "site-b", "nodes": 16}]
    assert span["inter_site_links"] == 2 and span["allreduce_inter_site_s"] > 0
    assert spanning.explanation["site"]["span"] == span
    assert "ring all-reduce" in spanning.reason and "crosses 2 inter-site links" in spanning.reason
    # its fabric is the one holding most of its nodes
    assert spanning.fabric_id == fabrics[1].pk
    # the usage guide says where it runs and what crossing costs
    from scheduling.usage_guide import env_file, usage_guide

    guide = usage_guide(spanning, "alice")
    assert guide.env["IBC_SITES"] == "site-b,site-a"
    assert (
        guide.sites_note.startswith("spans 2 sites (8 at site-a, 16 at site-b)")
        and "ring all-reduce" in guide.sites_note
    )
    assert "# sites: spans 2 sites" in env_file(guide)


def test_a_spanning_request_no_site_can_hold_queues_for_the_pool(two_site_pool, tenant_a, tenant_b):
    give_quota(tenant_a, two_site_pool, 192, 64)
    give_quota(tenant_b, two_site_pool, 64)
    blocker = reserve(tenant_b, two_site_pool, nodes=8, near="site-a", duration=dt.timedelta(hours=2))
    # 28 nodes: more than one site, and more than the 24 free now
    waiting = reserve_asap(tenant_a, two_site_pool, nodes=28, span_sites=True)
    assert waiting.status == S.QUEUED, (waiting.reason, waiting.explanation)
    assert abs((waiting.estimated_start - blocker.end).total_seconds()) <= 60
    # without span_sites it can never be placed: refused at once
    refused = reserve_asap(tenant_a, two_site_pool, nodes=28)
    assert refused.status == S.REJECTED
    # when the blocker ends, the queue places it over both sites and reports the ring's cost
    end_now(blocker)
    queue.queue_pass(two_site_pool.pk)
    waiting.refresh_from_db()
    assert waiting.status == S.PROVISIONING and fabric_of_nodes(waiting) == {"fab-a", "fab-b"}
    assert waiting.placement["span"]["inter_site_links"] == 2
    assert "ring all-reduce" in waiting.reason and waiting.explanation["site"]["rule"] == "span"


def test_a_single_site_pool_is_unchanged(pool, tenant_a, sites):
    give_quota(tenant_a, pool, 64)
    placed = reserve(tenant_a, pool, gpus=16, near="site-b")
    assert placed.status == S.PROVISIONING and placed.fabric_id == pool.fabric_id
    assert "sites" not in placed.placement and "site" not in placed.explanation and placed.reason == ""
    assert placed.near_site_id == sites[1].pk
    assert pool_topology(pool).site_slugs == ("",)


def test_the_api_takes_near_and_span_sites_and_answers_the_sites(
    two_site_pool, tenant_a, admin_a, client_for, sites, fabrics
):
    give_quota(tenant_a, two_site_pool, 128, 128)
    Dataset.objects.create(tenant=tenant_a, name="corpus", site=sites[1])
    api = client_for(admin_a)
    ask = {"pool": two_site_pool.pk, "gpus": 16, "duration_minutes": 60}
    near = api.post("/api/reservations/", {**ask, "near": "dataset:corpus"}, format="json")
    assert near.status_code == 201, near.content
    body = near.json()
    assert body["near"] == "dataset:corpus" and body["span_sites"] is False
    assert body["site"] == "site-b" and body["sites"] == ["site-b"]
    assert body["explanation"]["site"]["rule"] == "nearest_now"
    by_nodes = {"pool": two_site_pool.pk, "nodes": 20, "duration_minutes": 60}
    spanning = api.post("/api/reservations/", {**by_nodes, "span_sites": True}, format="json")
    assert spanning.status_code == 201, spanning.content
    spanned = spanning.json()
    assert spanned["span_sites"] is True and sorted(spanned["sites"]) == ["site-a", "site-b"]
    assert spanned["near"] is None and spanned["placement"]["span"]["inter_site_links"] == 2
    listed = {r["id"]: r for r in api.get("/api/reservations/").json()["results"]}
    assert listed[body["id"]]["site"] == "site-b"
    preview = api.post("/api/reservations/preview/", {**ask, "near": "site-a"}, format="json").json()
    assert preview["placement"]["sites"] == ["site-a"] and preview["site_choice"]["site"] == "site-a"
    unknown = api.post("/api/reservations/", {**ask, "near": "dataset:elsewhere"}, format="json")
    assert unknown.status_code == 400 and "elsewhere" not in unknown.content.decode()


def test_the_cli_takes_near_and_span_sites(two_site_pool, tenant_a):
    import json
    from io import StringIO

    from django.core.management import call_command

    give_quota(tenant_a, two_site_pool, 128, 128)
    args = ["schedule", "reserve", "--tenant", "tenant-a", "--pool", str(two_site_pool.pk), "--hours", "1", "--json"]
    out = StringIO()
    call_command(*args, "--gpus", "8", "--near", "site-b", stdout=out)
    assert json.loads(out.getvalue())["sites"] == ["site-b"]
    out = StringIO()
    call_command(*args, "--nodes", "20", "--span-sites", stdout=out)
    assert sorted(json.loads(out.getvalue())["sites"]) == ["site-a", "site-b"]


def test_the_form_offers_near_sites_and_own_datasets_for_a_multi_site_pool(
    client, member_a, two_site_pool, pool, tenant_a, tenant_b, sites
):
    from django.urls import reverse

    from tests.scheduling.test_reservation_pages import logged_in, page_init

    Dataset.objects.create(tenant=tenant_a, name="corpus", site=sites[1])
    Dataset.objects.create(tenant=tenant_b, name="secret-genomes", site=sites[1])
    response = logged_in(client, member_a).get(reverse("web:reservations"))
    init = page_init(response)
    # the pool with nodes at two sites shows the Near select and the span checkbox; the other not
    flags = {p["name"]: (p["multi_site"], p["sites"]) for p in init["pools"]}
    assert flags == {"both": (True, ["site-a", "site-b"]), "all": (False, [])}
    assert init["near"]["sites"] == [{"value": "site-a", "label": "Site A"}, {"value": "site-b", "label": "Site B"}]
    assert init["near"]["datasets"] == [{"value": "dataset:corpus", "label": "corpus (at Site B)"}]
    html = response.content.decode()
    assert 'data-testid="res-near"' in html and 'name="span_sites"' in html
    assert "secret-genomes" not in html


SHARP_REFUSED = "SHARP is not offered in pool 'both': its nodes are on 2 fabrics"


def test_sharp_in_a_pool_on_several_fabrics_is_refused(two_site_pool, tenant_a, fabrics):
    give_quota(tenant_a, two_site_pool, 256)
    # SHARP trees are a fabric's: near a site, spanning, queued or previewed, it is a 400 naming why
    for ask in ({"near": "site-b"}, {"span_sites": True, "nodes": 24}, {}):
        with pytest.raises(Invalid, match=SHARP_REFUSED) as refused:
            reserve(tenant_a, two_site_pool, **{"nodes": 2, **ask}, sharp=True)
        assert refused.value.fields == {"sharp": ["not in a pool on several fabrics"]}
        with pytest.raises(Invalid, match=SHARP_REFUSED):
            reserve_asap(tenant_a, two_site_pool, **{"nodes": 2, **ask}, sharp=True)
    with pytest.raises(Invalid, match="a SHARP aggregation tree stays within one fabric's switches"):
        reservations.preview(tenant_principal(tenant_a), request_for(two_site_pool, nodes=2, sharp=True))
    assert not Reservation.objects.exists()
    # the same request in a pool on one of those fabrics gets its tree there
    one = make_pool(fabrics[1], "b-only", nodes=list(Node.objects.filter(fabric=fabrics[1])))
    give_quota(tenant_a, one, 128)
    placed = reserve(tenant_a, one, nodes=2, sharp=True)
    assert placed.status == S.PROVISIONING and placed.placement["sharp"]


def test_the_api_refuses_sharp_in_a_pool_on_several_fabrics(two_site_pool, tenant_a, admin_a, client_for):
    give_quota(tenant_a, two_site_pool, 256)
    api = client_for(admin_a)
    ask = {"pool": two_site_pool.pk, "nodes": 2, "duration_minutes": 60, "sharp": True}
    for body in (ask, {**ask, "span_sites": True}, {**ask, "start": "asap"}):
        response = api.post("/api/reservations/", body, format="json")
        assert response.status_code == 400, response.content
        refused = response.json()
        assert refused["code"] == "invalid" and refused["detail"].startswith(SHARP_REFUSED)
        assert refused["fields"] == {"sharp": ["not in a pool on several fabrics"]}
    preview = api.post("/api/reservations/preview/", ask, format="json")
    assert preview.status_code == 400 and preview.json()["detail"].startswith(SHARP_REFUSED)
    assert not Reservation.objects.exists()


def test_a_manual_pool_names_nodes_of_other_fabrics_as_fabric_slash_node(fabrics, operator, client_for):
    fab_a, fab_b = fabrics
    Node.objects.filter(fabric=fab_b, name="node-016").update(name="b-node-016")  # the one name B alone has
    api = client_for(operator)

    def create(name: str, *node_names: str):
        body = {"fabric": fab_a.pk, "name": name, "kind": "manual", "node_names": list(node_names)}
        return api.post("/api/pools/", body, format="json")

    def held(response) -> set[tuple[str, str]]:
        assert response.status_code == 201, response.content
        return set(Node.objects.filter(pools=response.json()["id"]).values_list("fabric__name", "name"))

    # node-001 is a name of both fabrics: FABRIC/NODE says which; a bare name one candidate fabric
    # (the home fabric, or one named) holds is that fabric's node
    assert held(create("spread", "fab-a/node-001", "fab-b/node-001", "fab-b/node-003", "node-016", "b-node-016")) == {
        ("fab-a", "node-001"),
        ("fab-b", "node-001"),
        ("fab-b", "node-003"),
        ("fab-a", "node-016"),
        ("fab-b", "b-node-016"),
    }
    # a bare name several candidate fabrics hold is refused, naming the qualified choices
    refused = create("vague", "fab-b/node-003", "node-001")
    assert refused.status_code == 400
    assert "node-001 (fab-a/node-001 or fab-b/node-001)" in refused.json()["detail"]
    assert refused.json()["fields"]["nodes"] == {"node-001": ["fab-a/node-001", "fab-b/node-001"]}
    # with no other fabric named, bare names are the home fabric's as before
    assert held(create("home", "node-001", "node-004")) == {("fab-a", "node-001"), ("fab-a", "node-004")}
    # an unknown fabric or node is refused; a bare name only a fabric not named holds, with the name to use
    assert "unknown fabric(s): fab-z" in create("z", "fab-z/node-001").json()["detail"]
    assert "unknown node(s): fab-b/node-099" in create("z", "fab-b/node-099").json()["detail"]
    hint = create("hint", "node-001", "b-node-016").json()["detail"]
    assert hint == "unknown node(s): b-node-016 (on other fabrics: fab-b/b-node-016; name them so)"
