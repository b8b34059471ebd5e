"""/api/sites/ and /api/site-links/: who reads and writes, validation, 409s, audit.

Two sites, one link between them, and a fabric at site "north":

    [north] --ethernet 400 µs, 100 Gb/s-- [south]
      fabric lab-n
"""

from __future__ import annotations

import pytest

from console.fabric.models import Fabric, Site, SiteLink
from console.tenancy.models import AuditEntry
from tests.scheduling.conftest import make_fabric

pytestmark = pytest.mark.django_db

SITES = "/api/sites/"
LINKS = "/api/site-links/"


@pytest.fixture
def north(db) -> Site:
    return Site.objects.create(name="North", slug="north", location="Oslo")


@pytest.fixture
def south(db) -> Site:
    return Site.objects.create(name="South", slug="south", location="Milan")


@pytest.fixture
def fabric_north(north) -> Fabric:
    return make_fabric("lab-n", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"}, site=north)


def test_everyone_with_a_role_reads_sites_but_only_operators_see_their_fabrics(
    fabric_north, south, operator, auditor, member_a, client_for
):
    for user, fabrics in ((operator, ["lab-n"]), (auditor, ["lab-n"]), (member_a, [])):
        body = client_for(user).get(SITES).json()
        by = {row["slug"]: row for row in body["results"]}
        assert set(by) == {"north", "south"}, user
        assert by["north"]["fabrics"] == fabrics, user
        assert by["north"]["queue"] == "site.north"
        # no worker of site.north ever reported: unreachable, and tenants see no worker or SM names
        assert by["north"]["reachability"]["reachable"] is False, user
        assert by["north"]["reachability"]["last_seen"] is None, user
        assert ("worker" in by["north"]["reachability"]) == (user is not member_a), user


def test_only_operators_create_change_and_delete_sites(operator, admin_a, auditor, client_for):
    for user in (admin_a, auditor):
        assert client_for(user).post(SITES, {"name": "East", "slug": "east"}, format="json").status_code == 403
    assert not Site.objects.filter(slug="east").exists()
    created = client_for(operator).post(SITES, {"name": "East", "slug": "east", "location": "Vienna"}, format="json")
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    assert client_for(admin_a).patch(f"{SITES}{pk}/", {"location": "Graz"}, format="json").status_code == 403
    changed = client_for(operator).patch(f"{SITES}{pk}/", {"location": "Graz"}, format="json")
    assert changed.json()["location"] == "Graz"
    assert client_for(admin_a).delete(f"{SITES}{pk}/").status_code == 403
    assert client_for(operator).delete(f"{SITES}{pk}/").status_code == 204
    actions = list(AuditEntry.objects.filter(object_type="fabric.site").order_by("id").values_list("action", flat=True))
    assert actions == ["site.create", "site.update", "site.delete"]
    update = AuditEntry.objects.get(action="site.update")
    assert (update.before["location"], update.after["location"]) == ("Vienna", "Graz")


def test_a_bad_slug_is_refused_naming_the_field(operator, client_for):
    answer = client_for(operator).post(SITES, {"name": "West", "slug": "West Coast"}, format="json")
    assert answer.status_code == 400 and "slug" in answer.json()["fields"]


def test_a_site_with_fabrics_is_not_deleted(fabric_north, operator, client_for):
    answer = client_for(operator).delete(f"{SITES}{fabric_north.site_id}/")
    assert answer.status_code == 409
    assert "lab-n" in answer.json()["detail"] and "still has fabrics" in answer.json()["detail"]
    assert Site.objects.filter(pk=fabric_north.site_id).exists()
    assert not AuditEntry.objects.filter(action="site.delete").exists()


def test_a_link_named_in_either_order_is_stored_once_with_a_before_b(north, south, operator, client_for):
    body = {"a": "south", "b": "north", "kind": "ib_router", "latency_us": 400, "bandwidth_gbps": 100}
    created = client_for(operator).post(LINKS, body, format="json")
    assert created.status_code == 201, created.content
    link = SiteLink.objects.get()
    assert (link.a_id, link.b_id) == (min(north.pk, south.pk), max(north.pk, south.pk))
    again = client_for(operator).post(LINKS, body | {"a": "north", "b": "south"}, format="json")
    assert again.status_code == 409 and SiteLink.objects.count() == 1
    entry = AuditEntry.objects.get(action="site_link.create")
    assert {"North", "South"} <= set(entry.object_repr.replace("–", " ").split())


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"b": "north"}, "b"),
        ({"bandwidth_gbps": 0}, "bandwidth_gbps"),
        ({"bandwidth_gbps": -5}, "bandwidth_gbps"),
        ({"latency_us": -1}, "latency_us"),
        ({"kind": "carrier-pigeon"}, "kind"),
        ({"a": "no\x00rth"}, "a"),  # the database cannot hold NUL: a 400 of the field, not a 500
    ],
)
def test_a_bad_link_is_refused_naming_the_field(north, south, operator, client_for, change, field):
    body = {"a": "north", "b": "south", "kind": "ethernet", "latency_us": 400, "bandwidth_gbps": 100} | change
    answer = client_for(operator).post(LINKS, body, format="json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["fields"]
    assert not SiteLink.objects.exists()


def test_links_are_read_by_tenants_and_written_by_operators(north, south, operator, member_a, client_for):
    body = {"a": "north", "b": "south", "kind": "ethernet", "latency_us": 400, "bandwidth_gbps": 100}
    assert client_for(member_a).post(LINKS, body, format="json").status_code == 403
    pk = client_for(operator).post(LINKS, body, format="json").json()["id"]
    seen = client_for(member_a).get(LINKS).json()["results"]
    assert [(r["a"], r["b"], r["bandwidth_gbps"]) for r in seen] == [("north", "south", 100.0)]
    assert client_for(member_a).patch(f"{LINKS}{pk}/", {"latency_us": 1}, format="json").status_code == 403
    measured = client_for(operator).patch(f"{LINKS}{pk}/", {"latency_us": 380, "source": "measured"}, format="json")
    assert measured.status_code == 200 and measured.json()["measured_at"] is not None
    assert client_for(operator).delete(f"{LINKS}{pk}/").status_code == 204
    assert list(
        AuditEntry.objects.filter(action__startswith="site_link.").order_by("id").values_list("action", flat=True)
    ) == [
        "site_link.create",
        "site_link.update",
        "site_link.delete",
    ]


def test_operators_put_a_fabric_at_a_site(fabric_north, south, operator, client_for):
    moved = client_for(operator).patch(f"/api/fabrics/{fabric_north.pk}/", {"site": "south"}, format="json")
    assert moved.status_code == 200, moved.content
    assert moved.json()["site"] == "south"
    fabric_north.refresh_from_db()
    assert fabric_north.site_id == south.pk
    entry = AuditEntry.objects.get(action="fabric.update")
    assert entry.after["site_id"] == south.pk and entry.before["site_id"] != south.pk
    cleared = client_for(operator).patch(f"/api/fabrics/{fabric_north.pk}/", {"site": None}, format="json")
    assert cleared.json()["site"] is None
