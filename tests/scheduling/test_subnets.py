"""P_Keys per subnet: a reservation gets a P_Key on every fabric (subnet) its nodes are on, the
same value where every range allows; each fabric carries it with its own member ports; it is
ready once every fabric verified it and released once every fabric verified it gone.

Two small fabrics from designs, "site-a" and "site-b" (8 DGX H100 each; B's nodes and leaves
renamed, the designs name them alike), and a pool "span" holding all of A and half of B:

    site-a: [node-001 … node-008]          site-b: [b-node-001 … b-node-004] [b-node-005 … b-node-008]
             └──────────────── pool "span" ─────────────────┘                  └── pool "b-only" ──┘
"""

from __future__ import annotations

import datetime as dt
import importlib

import pytest
from django.apps import apps
from django.db.models import F
from django.urls import reverse

from console.fabric import enqueue, hooks
from console.fabric.changes.qos import set_qos_table
from console.fabric.models import Fabric, Site, SiteLink
from console.fabric.opensm.qos_table import DEFAULT_TABLE
from console.fabric.services import KeySpace, allocate_pkeys
from console.tenancy.errors import Conflict
from scheduling.models import HCA, Node, Pool, Reservation, ReservationAllocation, ReservationSubnet
from scheduling.services import lifecycle, reservations, snapshots
from scheduling.services.grant import placement_fabrics
from scheduling.services.subnets import subnets_of
from scheduling.usage_guide import env_file, usage_guide
from tests.needs import needs
from tests.scheduling.conftest import (
    OPERATOR,
    SYSTEM,
    give_quota,
    make_fabric,
    make_pool,
    report_power,
    request_for,
    tenant_principal,
)
from tests.scheduling.test_reservation_pages import logged_in

pytestmark = [pytest.mark.django_db, needs("postgresql")]
S = Reservation.Status
SPEC = {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"}


def rename(fabric: Fabric, prefix: str) -> None:
    for node in Node.objects.filter(fabric=fabric):
        Node.objects.filter(pk=node.pk).update(name=prefix + node.name)
    for hca in HCA.objects.filter(node__fabric=fabric):
        HCA.objects.filter(pk=hca.pk).update(leaf=prefix + hca.leaf)


def two_fabrics(**b_kw) -> tuple[Fabric, Fabric]:
    a = make_fabric("site-a", SPEC)
    b = make_fabric("site-b", SPEC, **b_kw)
    rename(b, "b-")
    return a, b


def spanning_pool(a: Fabric, b_nodes: list[Node], name: str = "span") -> Pool:
    """A pool of ``a`` with ``b_nodes`` added (the way a pool across sites holds them)."""
    pool = make_pool(a, name)
    pool.nodes.add(*b_nodes)
    Pool.objects.filter(pk=pool.pk).update(version=F("version") + 1)
    pool.refresh_from_db()
    return pool


@pytest.fixture
def world(tenant_a):
    """Fabrics A and B, pool "span" (A + half of B), pool "b-only" (the other half of B)."""
    snapshots.forget()
    a, b = two_fabrics()
    b_nodes = list(Node.objects.filter(fabric=b).order_by("name"))
    span = spanning_pool(a, b_nodes[:4])
    b_only = make_pool(b, "b-only", b_nodes[4:])
    give_quota(tenant_a, span, 96)
    give_quota(tenant_a, b_only, 32)
    yield a, b, span, b_only
    snapshots.forget()


def reserve(tenant, pool, **kw) -> Reservation:
    return reservations.reserve(SYSTEM, tenant_principal(tenant), request_for(pool, **kw))


def subnet_keys(reservation: Reservation) -> dict[int, int]:
    return dict(ReservationSubnet.objects.filter(reservation=reservation).values_list("fabric_id", "pkey"))


def nodes_on(reservation: Reservation, fabric: Fabric) -> set[int]:
    rows = ReservationAllocation.objects.filter(reservation=reservation, node__fabric=fabric)
    return set(rows.values_list("node_id", flat=True))


def guids_on(reservation: Reservation, fabric: Fabric) -> list[str]:
    return sorted(HCA.objects.filter(node_id__in=nodes_on(reservation, fabric)).values_list("port_guid", flat=True))


def test_a_spanning_reservation_gets_one_pkey_on_both_fabrics_and_its_home_is_where_most_nodes_are(world, tenant_a):
    a, b, span, _ = world
    # when a gang larger than A (64 GPUs) is placed in the pool spanning A and B
    made = reserve(tenant_a, span, gpus=80, span_sites=True)
    assert made.status == S.PROVISIONING
    # then it holds nodes on both fabrics, with the same P_Key on each
    on_a, on_b = nodes_on(made, a), nodes_on(made, b)
    assert on_a and on_b and len(on_a) + len(on_b) == 10
    keys = subnet_keys(made)
    assert set(keys) == {a.pk, b.pk} and len(set(keys.values())) == 1
    # its fabric is the one holding most of its nodes; its pkey, the common value
    assert made.fabric_id == (a.pk if len(on_a) >= len(on_b) else b.pk)
    assert made.pkey == keys[a.pk] and made.pkey_live
    # the API's subnets: its own fabric first
    views = subnets_of([made.pk])[made.pk]
    assert [v["fabric"] for v in views][0] == made.fabric.name
    assert {(v["fabric"], v["pkey"], v["live"]) for v in views} == {
        ("site-a", f"0x{made.pkey:04x}", True),
        ("site-b", f"0x{made.pkey:04x}", True),
    }


def test_the_common_value_skips_a_key_live_on_either_fabric(world, tenant_a):
    a, b, span, b_only = world
    # given a reservation on B alone holding B's first key
    alone = reserve(tenant_a, b_only, gpus=8)
    assert subnet_keys(alone) == {b.pk: b.pkey_min}
    # when a spanning reservation is placed
    made = reserve(tenant_a, span, gpus=80, span_sites=True)
    # then it takes the next key on both (A's first key is free, but not on B)
    assert subnet_keys(made) == {a.pk: a.pkey_min + 1, b.pk: a.pkey_min + 1}


def test_keys_differ_per_fabric_when_no_value_is_free_in_both_ranges_and_the_guide_says_so(
    tenant_a, admin_a, client, client_for
):
    snapshots.forget()
    a, b = two_fabrics(pkey_min=0x0200, pkey_max=0x02FF)
    Fabric.objects.filter(pk=a.pk).update(pkey_min=0x0100, pkey_max=0x01FF)
    span = spanning_pool(a, list(Node.objects.filter(fabric=b))[:4])
    give_quota(tenant_a, span, 96)
    made = reserve(tenant_a, span, gpus=80, span_sites=True)
    assert subnet_keys(made) == {a.pk: 0x0100, b.pk: 0x0200}
    # each fabric carries its own key
    assert {p["pkey"] for p in hooks.requested_partitions(a.pk)} == {0x0100}
    assert {p["pkey"] for p in hooks.requested_partitions(b.pk)} == {0x0200}
    # the how-to-use page lists the P_Key per site and says NCCL_IB_PKEY differs per site
    Reservation.objects.filter(pk=made.pk).update(status=S.READY)
    made.refresh_from_db()
    guide = usage_guide(made, "alice")
    assert [(s.fabric, s.pkey_hex) for s in guide.subnets] == sorted(
        [("site-a", "0x0100"), ("site-b", "0x0200")], key=lambda s: s[0] != made.fabric.name
    )
    assert "NCCL_IB_PKEY differs per site" in guide.pkey_per_site_note and guide.pkey_index is None
    text = env_file(guide)
    assert "IBC_PKEYS=site-a:0x0100,site-b:0x0200" in text or "IBC_PKEYS=site-b:0x0200,site-a:0x0100" in text
    assert "NCCL_IB_PKEY=" not in text
    # the page and the API say the same
    logged_in(client, admin_a)
    page = client.get(reverse("web:reservation-use", args=[made.pk])).content.decode()
    assert page.count('data-testid="use-subnet"') == 2 and "NCCL_IB_PKEY differs per site" in page
    body = client_for(admin_a).get(f"/api/reservations/{made.pk}/usage-guide/").json()
    assert sorted(s["pkey_hex"] for s in body["subnets"]) == ["0x0100", "0x0200"]
    assert body["pkey_per_site_note"].startswith("NCCL_IB_PKEY differs per site") and body["pkey_index"] is None
    snapshots.forget()


def test_allocation_prefers_one_value_and_names_an_exhausted_fabric():
    # one value free in both ranges: taken on both
    both = [KeySpace(1, "site-a", 0x100, 0x1FF, frozenset({0x100})), KeySpace(2, "site-b", 0x100, 0x7FFE, frozenset())]
    assert allocate_pkeys(both) == {1: 0x101, 2: 0x101}
    # ranges apart: the lowest free key of each
    apart = [KeySpace(1, "site-a", 0x100, 0x1FF, frozenset({0x100})), KeySpace(2, "site-b", 0x200, 0x2FF, frozenset())]
    assert allocate_pkeys(apart) == {1: 0x101, 2: 0x200}
    # one range exhausted: refused, naming that fabric
    with pytest.raises(Conflict, match="fabric site-b has no free P_Key in 0x0005..0x0005"):
        allocate_pkeys([KeySpace(1, "site-a", 0x100, 0x1FF, frozenset()), KeySpace(2, "site-b", 5, 5, frozenset({5}))])


def test_each_fabric_carries_the_partition_with_its_own_ports_key_and_sl(world, tenant_a):
    a, b, span, _ = world
    table = DEFAULT_TABLE.to_json()
    table["classes"]["training"]["sl"] = 3  # B's training class is on SL 3
    set_qos_table(SYSTEM, OPERATOR, b, table)
    made = reserve(tenant_a, span, gpus=80, span_sites=True)
    (on_a,) = [p for p in hooks.requested_partitions(a.pk) if p["reservation_id"] == made.pk]
    (on_b,) = [p for p in hooks.requested_partitions(b.pk) if p["reservation_id"] == made.pk]
    assert [m[0] for m in on_a["members"]] == guids_on(made, a)
    assert [m[0] for m in on_b["members"]] == guids_on(made, b)
    assert on_a["pkey"] == on_b["pkey"] == made.pkey
    assert on_a["name"] == on_b["name"] == f"res-{made.pk}"
    assert (on_a["sl"], on_b["sl"]) == (1, 3)


def test_ready_only_once_every_fabric_verified_its_pkey(world, tenant_a):
    a, b, span, _ = world
    made = reserve(tenant_a, span, gpus=80, span_sites=True)
    hooks.notify_verified(a.pk, present_pkeys={made.pkey}, change_id=1)
    made.refresh_from_db()
    assert made.status == S.PROVISIONING  # B has not verified it yet
    hooks.notify_verified(b.pk, present_pkeys=set(), change_id=2)  # a change of B without it
    made.refresh_from_db()
    assert made.status == S.PROVISIONING
    hooks.notify_verified(b.pk, present_pkeys={made.pkey}, change_id=3)
    made.refresh_from_db()
    assert made.status == S.READY and made.ready_at is not None


def test_a_node_powered_off_while_provisioning_makes_its_fabric_verify_the_pkey_again(
    world, tenant_a, monkeypatch, django_capture_on_commit_callbacks
):
    a, b, span, _ = world
    monkeypatch.setattr(enqueue, "publish_reconcile", lambda fabric_id: None)
    made = reserve(tenant_a, span, gpus=80, span_sites=True)
    # given B verified the P_Key on its ports, A not yet
    hooks.notify_verified(b.pk, present_pkeys={made.pkey}, change_id=1)
    verified = dict(ReservationSubnet.objects.filter(reservation=made).values_list("fabric_id", "verified_at"))
    assert verified[a.pk] is None and verified[b.pk] is not None
    # when one of its nodes on B is powered off (its HCAs lose the P_Key) and back on
    node_id = min(nodes_on(made, b))
    with django_capture_on_commit_callbacks(execute=True):
        report_power(node_id, Node.Power.OFF)
    # then B's verification is forgotten, A's row untouched
    verified = dict(ReservationSubnet.objects.filter(reservation=made).values_list("fabric_id", "verified_at"))
    assert verified == {a.pk: None, b.pk: None}
    with django_capture_on_commit_callbacks(execute=True):
        report_power(node_id, Node.Power.ON)
    # and A's verification alone does not make it ready: B must verify it on the booted ports
    hooks.notify_verified(a.pk, present_pkeys={made.pkey}, change_id=2)
    made.refresh_from_db()
    assert made.status == S.PROVISIONING
    hooks.notify_verified(b.pk, present_pkeys={made.pkey}, change_id=3)
    made.refresh_from_db()
    assert made.status == S.READY


def test_release_frees_the_key_per_fabric_and_releases_once_every_fabric_verified_it_gone(
    world, tenant_a, monkeypatch, django_capture_on_commit_callbacks
):
    a, b, span, _ = world
    published: list[int] = []
    monkeypatch.setattr(enqueue, "publish_reconcile", published.append)
    with django_capture_on_commit_callbacks(execute=True):
        made = reserve(tenant_a, span, gpus=80, span_sites=True)
    assert sorted(published) == sorted([a.pk, b.pk])  # both fabrics reconcile the new partition
    for fabric in (a, b):
        hooks.notify_verified(fabric.pk, present_pkeys={made.pkey}, change_id=fabric.pk)
    published.clear()
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.release(SYSTEM, tenant_principal(tenant_a), made)
    assert sorted(published) == sorted([a.pk, b.pk])  # both fabrics remove it
    assert not hooks.requested_partitions(a.pk) and not hooks.requested_partitions(b.pk)
    # when A verified it gone, B not yet
    hooks.notify_verified(a.pk, present_pkeys=set(), change_id=10)
    made.refresh_from_db()
    live = dict(ReservationSubnet.objects.filter(reservation=made).values_list("fabric_id", "pkey_live"))
    assert live == {a.pk: False, b.pk: True}
    assert made.status == S.ENDING and made.pkey_live
    # then A's key is free for a reservation on A alone, while B still holds it
    a_only = make_pool(a, "a-only", [])
    a_only.nodes.set(Node.objects.filter(fabric=a))
    give_quota(tenant_a, a_only, 64)
    again = reserve(tenant_a, a_only, gpus=8)
    assert subnet_keys(again) == {a.pk: made.pkey}
    # and once B verified it gone too, the reservation is released
    hooks.notify_verified(b.pk, present_pkeys=set(), change_id=11)
    made.refresh_from_db()
    assert made.status == S.RELEASED and not made.pkey_live
    assert not ReservationSubnet.objects.filter(reservation=made, pkey_live=True).exists()


def test_placement_fabrics_put_the_fabric_with_most_nodes_first():
    from scheduling.placement import Placement
    from scheduling.services.topology import NamedTopology

    named = NamedTopology.__new__(NamedTopology)
    object.__setattr__(named, "node_fabric", (7, 7, 9, 9, 9))
    placement = Placement.__new__(Placement)
    object.__setattr__(placement, "node_ids", (0, 1, 2, 3, 4))
    assert placement_fabrics(named, placement, home=7) == [9, 7]
    object.__setattr__(placement, "node_ids", (0, 1, 2, 3))
    assert placement_fabrics(named, placement, home=9) == [9, 7]  # a tie: the pool's home fabric
    object.__setattr__(named, "node_fabric", ())
    assert placement_fabrics(named, placement, home=5) == [5]


def test_the_data_migration_gives_every_reservation_with_a_pkey_its_subnet_row(world, tenant_a):
    a, b, span, b_only = world
    live = reserve(tenant_a, b_only, gpus=8)
    done = reserve(tenant_a, b_only, gpus=8)
    Reservation.objects.filter(pk=done.pk).update(status=S.RELEASED, pkey_live=False, sl=4)
    queued = Reservation.objects.create(
        tenant=tenant_a, pool=b_only, fabric=b, start=live.start, end=live.end + dt.timedelta(hours=1)
    )
    ReservationSubnet.objects.all().delete()  # as before the migration
    migration = importlib.import_module("scheduling.migrations.0011_subnet_sl_verified_backfill")
    migration.backfill(apps, None)
    rows = ReservationSubnet.objects.values_list("reservation_id", "fabric_id", "pkey", "pkey_live", "sl")
    assert sorted(rows) == sorted([(live.pk, b.pk, live.pkey, True, live.sl), (done.pk, b.pk, done.pkey, False, 4)])
    assert queued.pk not in {r[0] for r in rows}


def test_across_an_ib_router_the_partition_takes_the_router_ports_on_each_side(world, tenant_a):
    a, b, span, _ = world
    east, west = Site.objects.create(name="East", slug="east"), Site.objects.create(name="West", slug="west")
    Fabric.objects.filter(pk=a.pk).update(site=east)
    Fabric.objects.filter(pk=b.pk).update(site=west)
    low, high = sorted([east, west], key=lambda s: s.pk)
    link = SiteLink.objects.create(a=low, b=high, kind=SiteLink.Kind.ETHERNET, latency_us=900, bandwidth_gbps=100)
    made = reserve(tenant_a, span, gpus=80, span_sites=True)

    def members(fabric):
        (partition,) = [p for p in hooks.requested_partitions(fabric.pk) if p["reservation_id"] == made.pk]
        return [m[0] for m in partition["members"]]

    # over Ethernet: the hosts' ports only
    assert "ALL_ROUTERS" not in members(a) and "ALL_ROUTERS" not in members(b)
    # over an IB router: the router ports of each subnet too (OpenSM's ALL_ROUTERS)
    SiteLink.objects.filter(pk=link.pk).update(kind=SiteLink.Kind.IB_ROUTER)
    assert members(a) == [*guids_on(made, a), "ALL_ROUTERS"]
    assert members(b) == [*guids_on(made, b), "ALL_ROUTERS"]
    # a UFM fabric takes port GUIDs only
    Fabric.objects.filter(pk=b.pk).update(driver=Fabric.Driver.UFM)
    assert "ALL_ROUTERS" not in members(b) and "ALL_ROUTERS" in members(a)
    # and the subnets' sites are in the API
    assert {(v["fabric"], v["site"]) for v in subnets_of([made.pk])[made.pk]} == {
        ("site-a", "east"),
        ("site-b", "west"),
    }


def test_the_api_lists_the_subnets_of_a_reservation_its_own_fabric_first(world, tenant_a, admin_a, client_for):
    a, b, span, b_only = world
    api = client_for(admin_a)
    alone = api.post("/api/reservations/", {"pool": b_only.pk, "gpus": 8, "duration_minutes": 60}, format="json")
    spanning = api.post(
        "/api/reservations/", {"pool": span.pk, "gpus": 80, "duration_minutes": 60, "span_sites": True}, format="json"
    )
    assert alone.status_code == spanning.status_code == 201, (alone.content, spanning.content)
    made = Reservation.objects.get(pk=spanning.json()["id"])
    key = f"0x{made.pkey:04x}"
    expected = [
        {"fabric": made.fabric.name, "site": None, "pkey": key, "live": True},
        *[{"fabric": f.name, "site": None, "pkey": key, "live": True} for f in (a, b) if f.pk != made.fabric_id],
    ]
    assert api.get(f"/api/reservations/{made.pk}/").json()["subnets"] == expected
    listed = {r["id"]: r["subnets"] for r in api.get("/api/reservations/").json()["results"]}
    assert listed[made.pk] == expected
    assert listed[alone.json()["id"]] == [{"fabric": "site-b", "site": None, "pkey": "0x0100", "live": True}]


def test_the_guide_gives_the_sl_per_subnet_and_no_single_sl_when_the_sites_differ(
    world, tenant_a, admin_a, client, client_for
):
    a, b, span, _ = world
    # when the sites' QoS tables agree (training on SL 1 at both): one NCCL_IB_SL, and each subnet's SL
    agreeing = reserve(tenant_a, span, gpus=80, span_sites=True)
    guide = usage_guide(agreeing, "alice")
    assert [s.sl for s in guide.subnets] == [1, 1] and guide.sl == 1 and not guide.sl_per_site_note
    assert guide.env["NCCL_IB_SL"] == guide.env["UCX_IB_SL"] == "1"
    lifecycle.release(SYSTEM, tenant_principal(tenant_a), agreeing)
    # when B's QoS table puts the training class on SL 3
    table = DEFAULT_TABLE.to_json()
    table["classes"]["training"]["sl"] = 3
    set_qos_table(SYSTEM, OPERATOR, b, table)
    made = reserve(tenant_a, span, gpus=80, span_sites=True)
    guide = usage_guide(made, "alice")
    # then each subnet carries its own SL, and no single SL is given
    assert {(s.fabric, s.sl) for s in guide.subnets} == {("site-a", 1), ("site-b", 3)}
    assert guide.sl is None and guide.sl_per_site_note.startswith("NCCL_IB_SL and UCX_IB_SL differ per site")
    b_hosts = next(s.hosts for s in guide.subnets if s.fabric == "site-b")
    assert f"site-b ({', '.join(b_hosts)}): SL 3" in guide.sl_per_site_note
    text = env_file(guide)
    assert "NCCL_IB_SL=" not in text and "UCX_IB_SL=" not in text
    assert "# NCCL_IB_SL, UCX_IB_SL omitted: NCCL_IB_SL and UCX_IB_SL differ per site" in text
    assert "IBC_SLS=site-a:1,site-b:3" in text or "IBC_SLS=site-b:3,site-a:1" in text
    # the page and the API say the same
    logged_in(client, admin_a)
    page = client.get(reverse("web:reservation-use", args=[made.pk])).content.decode()
    assert 'data-testid="use-sl-per-site"' in page and 'data-testid="use-sl"' not in page
    assert page.count('data-testid="use-subnet-sl"') == 2
    body = client_for(admin_a).get(f"/api/reservations/{made.pk}/usage-guide/").json()
    assert body["sl"] is None and sorted(s["sl"] for s in body["subnets"]) == [1, 3]
    assert body["sl_per_site_note"] == guide.sl_per_site_note and "NCCL_IB_SL" not in body["env"]
