"""The Sites and Datasets pages, the dashboard grouped by site and the live page's fabric picker.

site North: fabric lab-n (4 DGX H100, 32 GPUs; 8 held by tenant A's ready reservation)
site South: no fabric
no site:    fabric lab-x (4 DGX H100, 32 GPUs)
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.test import Client
from django.utils import timezone

from console.fabric.models import Site, SiteLink
from console.tenancy.models import AuditEntry
from scheduling.models import GPU, Dataset, Reservation, ReservationAllocation, ReservationSubnet
from tests.scheduling.conftest import make_fabric, make_pool

pytestmark = pytest.mark.django_db
SMALL = {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"}


@pytest.fixture
def world(tenant_a):
    north = Site.objects.create(name="North", slug="north", location="Oslo")
    south = Site.objects.create(name="South", slug="south")
    lab_n = make_fabric("lab-n", SMALL, site=north)
    lab_x = make_fabric("lab-x", SMALL)
    pool = make_pool(lab_n)
    now = timezone.now()
    res = Reservation.objects.create(
        tenant=tenant_a,
        pool=pool,
        fabric=lab_n,
        start=now - dt.timedelta(hours=1),
        end=now + dt.timedelta(hours=1),
        gpus=8,
        status="ready",
    )
    gpus = GPU.objects.filter(node__fabric=lab_n).order_by("pk")[:8]
    ReservationAllocation.objects.bulk_create(
        ReservationAllocation(reservation=res, gpu=gpu, node_id=gpu.node_id, start=res.start, end=res.end)
        for gpu in gpus
    )
    return {"north": north, "south": south, "lab_n": lab_n, "lab_x": lab_x}


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_sites_page_shows_fabrics_nodes_and_gpus_per_site(world, operator):
    html = _as(operator).get("/sites/").content.decode()
    north = html[html.index('data-testid="site-north"') : html.index('data-testid="site-south"')]
    assert "lab-n" in north and "lab-x" not in north
    assert (
        '<strong data-testid="site-nodes">4</strong>' in north
        and '<strong data-testid="site-gpus">32</strong>' in north
    )
    assert "site.north" in north and "Oslo" in north
    loose = html[html.index('data-testid="site-none"') :]
    assert "lab-x" in loose and "Fabrics without a site" in loose


def test_an_operator_adds_a_site_and_a_link_from_either_end_then_changes_it(world, operator):
    client = _as(operator)
    added = client.post("/sites/", {"form": "site", "site-name": "East", "site-slug": "east"}, follow=True)
    assert "Site East added" in added.content.decode()
    east = Site.objects.get(slug="east")
    link = {"form": "link", "link-kind": "ib_router", "link-latency_us": "500", "link-bandwidth_gbps": "200"}
    client.post("/sites/", link | {"link-a": "east", "link-b": "north", "link-source": "entered"})
    changed = client.post(
        "/sites/", link | {"link-a": "north", "link-b": "east", "link-source": "measured", "link-latency_us": "450"}
    )
    assert changed.status_code == 302
    row = SiteLink.objects.get()
    assert (row.a_id, row.b_id) == tuple(sorted((east.pk, world["north"].pk)))
    assert (row.latency_us, row.source, row.measured_at is not None) == (450, "measured", True)
    page = client.get("/sites/").content.decode()
    assert "450 µs" in page and "200 Gb/s" in page and "InfiniBand router" in page
    actions = list(AuditEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions[-3:] == ["site.create", "site_link.create", "site_link.update"]


def test_an_operator_edits_a_site_and_a_refusal_is_shown(world, operator):
    client = _as(operator)
    edit = client.get(f"/sites/?edit={world['south'].pk}").content.decode()
    assert "Edit site South" in edit and 'value="South"' in edit
    form = {"form": "site", "site_id": world["south"].pk, "site-name": "South", "site-slug": "south"}
    client.post("/sites/", form | {"site-location": "Milan"})
    assert Site.objects.get(pk=world["south"].pk).location == "Milan"
    bad = client.post(
        "/sites/",
        {"form": "link", "link-a": "north", "link-b": "north", "link-kind": "ethernet"}
        | {"link-latency_us": "1", "link-bandwidth_gbps": "1", "link-source": "entered"},
    )
    assert "a link joins two different sites" in bad.content.decode()
    refused = client.post(f"/sites/{world['north'].pk}/delete/", follow=True).content.decode()
    assert "still has fabrics: lab-n" in refused
    assert Site.objects.filter(pk=world["north"].pk).exists()


def test_auditors_read_the_sites_page_without_forms_and_tenants_do_not_see_it(world, auditor, admin_a):
    page = _as(auditor).get("/sites/")
    assert page.status_code == 200 and 'method="post"' not in page.content.decode().split("</header>")[-1]
    assert _as(auditor).post("/sites/", {"form": "site", "site-name": "X", "site-slug": "x"}).status_code == 403
    assert _as(auditor).post(f"/sites/{world['south'].pk}/delete/").status_code == 403
    assert _as(admin_a).get("/sites/").status_code == 404
    assert Site.objects.count() == 2


def test_a_tenant_registers_and_deletes_its_datasets_and_never_sees_anothers(
    world, admin_a, member_b, tenant_a, tenant_b
):
    theirs = Dataset.objects.create(tenant=tenant_b, name="b-secret", site=world["north"])
    client = _as(admin_a)
    client.post("/datasets/", {"name": "corpus", "site": world["south"].pk, "size_tb": "2.5"})
    page = client.get("/datasets/").content.decode()
    assert "corpus" in page and "South" in page and "b-secret" not in page
    assert client.post(f"/datasets/{theirs.pk}/delete/").status_code == 404
    mine = Dataset.objects.get(name="corpus")
    assert mine.tenant_id == tenant_a.pk
    client.post(f"/datasets/{mine.pk}/delete/")
    assert not Dataset.objects.filter(pk=mine.pk).exists() and Dataset.objects.filter(pk=theirs.pk).exists()
    assert "b-secret" in _as(member_b).get("/datasets/").content.decode()


def test_the_dashboard_groups_fabrics_under_their_site_with_gpus(world, operator):
    html = _as(operator).get("/").content.decode()
    heads = html.split('data-testid="dash-site-head"')[1:]
    assert [h.split('class="site-name">')[1].split("<")[0] for h in heads] == ["North", "lab-x"]
    north = heads[0].split("</th>")[0]
    assert '"site-gpus-allocated">8<' in north and '"site-gpus-total">32<' in north and "(25 %)" in north
    assert f"dash-fabric-{world['lab_n'].pk}" in heads[0] and f"dash-fabric-{world['lab_x'].pk}" not in heads[0]
    assert "(no site)" in heads[1]


def test_the_live_picker_groups_fabrics_by_site(world, operator, member_a):
    html = _as(operator).get(f"/fabrics/{world['lab_x'].pk}/live/").content.decode()
    picker = html[html.index('data-testid="live-picker"') :].split("</nav>")[0]
    assert picker.index("North") < picker.index("lab-n") < picker.index("No site") < picker.index("lab-x")
    assert f'href="/fabrics/{world["lab_x"].pk}/live/" aria-current="page"' in picker
    # a tenant is offered the fabrics its reservations run on, not every fabric of a site
    tenant_page = _as(member_a).get(f"/fabrics/{world['lab_n'].pk}/live/").content.decode()
    assert 'data-testid="live-picker"' not in tenant_page


def hold(reservation: Reservation, fabric, node_name: str) -> None:
    """``reservation`` holds the node ``node_name`` of ``fabric`` (and has a subnet row there)."""
    gpus = GPU.objects.filter(node__fabric=fabric, node__name=node_name)
    ReservationAllocation.objects.bulk_create(
        ReservationAllocation(
            reservation=reservation, gpu=g, node_id=g.node_id, start=reservation.start, end=reservation.end
        )
        for g in gpus
    )
    ReservationSubnet.objects.get_or_create(reservation=reservation, fabric=fabric, defaults={"pkey": 0x100})


def test_the_tenant_picker_offers_the_second_fabric_of_a_spanning_reservation(world, tenant_b, member_a, admin_b):
    lab_n, lab_x = world["lab_n"], world["lab_x"]
    # tenant A's reservation (home lab-n, node-001) spans to lab-x (node-002 there)
    mine = Reservation.objects.get()
    ReservationSubnet.objects.create(reservation=mine, fabric=lab_n, pkey=0x100)
    hold(mine, lab_x, "node-002")
    # tenant B holds node-004 of lab-x
    theirs = Reservation.objects.create(
        tenant=tenant_b,
        pool=make_pool(lab_x),
        fabric=lab_x,
        start=mine.start,
        end=mine.end,
        gpus=8,
        status="ready",
        created_by=admin_b,
    )
    ReservationSubnet.objects.create(reservation=theirs, fabric=lab_x, pkey=0x101)
    hold(theirs, lab_x, "node-004")
    # then tenant A's live page offers lab-x beside lab-n, grouped by their sites
    html = _as(member_a).get(f"/fabrics/{lab_n.pk}/live/").content.decode()
    picker = html[html.index('data-testid="live-picker"') :].split("</nav>")[0]
    assert picker.index("North") < picker.index("lab-n") < picker.index("No site") < picker.index("lab-x")
    assert f'href="/fabrics/{lab_x.pk}/live/"' in picker
    # and lab-x's page names neither tenant B's host nor its user
    other = _as(member_a).get(f"/fabrics/{lab_x.pk}/live/").content.decode()
    assert 'data-testid="live-picker"' in other
    assert "node-004" not in other and "admin-b" not in other and "Tenant B" not in other


def test_the_live_canvas_names_a_tenants_own_hosts_by_the_fabric_they_are_on(world, member_a):
    lab_n, lab_x = world["lab_n"], world["lab_x"]
    # tenant A's reservation (home lab-n: node-001) spans to lab-x (node-002 there); both designs
    # name their nodes alike, and lab-n's node-002 is not tenant A's
    mine = Reservation.objects.get()
    ReservationSubnet.objects.create(reservation=mine, fabric=lab_n, pkey=0x100)
    hold(mine, lab_x, "node-002")
    home = _as(member_a).get(f"/fabrics/{lab_n.pk}/live/").content.decode()
    second = _as(member_a).get(f"/fabrics/{lab_x.pk}/live/").content.decode()
    # then each fabric's canvas names the tenant's hosts on that fabric, and no other
    assert "node-001" in home and "node-002" not in home
    assert "node-002" in second and "node-001" not in second


def test_a_spanning_reservation_is_on_the_live_streams_of_each_fabric_it_touches(
    world, tenant_a, django_capture_on_commit_callbacks
):
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from console.broadcast import tenant_group
    from console.telemetry.power import announce
    from console.telemetry.services import ready_reservations
    from scheduling.models import Node

    lab_n, lab_x = world["lab_n"], world["lab_x"]
    mine = Reservation.objects.get()
    ReservationSubnet.objects.create(reservation=mine, fabric=lab_n, pkey=0x100, sl=1)
    hold(mine, lab_x, "node-002")
    ReservationSubnet.objects.filter(reservation=mine, fabric=lab_x).update(sl=3)
    # the link model of each fabric sees the reservation with that fabric's nodes and SL
    [(home_nodes, home_sl)] = [(r.nodes, r.sl) for r in ready_reservations(lab_n.pk) if r.id == mine.pk]
    [(far_nodes, far_sl)] = [(r.nodes, r.sl) for r in ready_reservations(lab_x.pk) if r.id == mine.pk]
    assert home_nodes == ("node-001",) and home_sl == 1
    assert far_nodes == ("node-002",) and far_sl == 3
    # and a power change of its node on the second fabric reaches the tenant's stream
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(tenant_group(tenant_a.pk), channel)
    far_node = Node.objects.get(fabric=lab_x, name="node-002")
    with django_capture_on_commit_callbacks(execute=True):
        announce(node_id=far_node.pk, state="off")
    sent = json.loads(async_to_sync(layer.receive)(channel)["text"])
    assert (sent["type"], sent["node"], sent["fabric"]) == ("node.power", "node-002", lab_x.pk)
