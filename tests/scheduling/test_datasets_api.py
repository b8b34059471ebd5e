"""/api/datasets/: a tenant sees and manages only its own (another tenant's answers 404),
operators see all and register for a tenant; names unique per tenant; every write audited."""

from __future__ import annotations

import pytest

from console.fabric.models import Site
from console.tenancy.models import AuditEntry
from scheduling.api.dataset_views import DatasetViewSet
from scheduling.models import Dataset
from tests.isolation import IsolationSuite

pytestmark = pytest.mark.django_db

URL = "/api/datasets/"


@pytest.fixture
def north(db) -> Site:
    return Site.objects.create(name="North", slug="north")


@pytest.fixture
def south(db) -> Site:
    return Site.objects.create(name="South", slug="south")


class TestDatasetIsolation(IsolationSuite):
    viewset = DatasetViewSet
    basename = "dataset"
    filter_fields = ["tenant", "site"]

    def make_object(self, tenant, user):
        site, _ = Site.objects.get_or_create(slug="iso-site", defaults={"name": "Iso site"})
        return Dataset.objects.create(tenant=tenant, name=f"corpus-{tenant.slug}", site=site)

    def create_payload(self, other_tenant):
        return {"tenant": other_tenant.pk, "status": "ready", "owner": 1, "name": "planted", "site": "iso-site"}


def test_a_tenant_registers_at_a_site_and_sees_only_its_own(north, admin_a, member_b, client_for, tenant_a, tenant_b):
    # given: tenant B has a dataset
    Dataset.objects.create(tenant=tenant_b, name="imagenet", site=north)
    # when: tenant A registers one of the same name (names are per tenant), posting B as owner
    answer = client_for(admin_a).post(
        URL, {"name": "imagenet", "site": "north", "size_tb": 1.5, "tenant": tenant_b.pk}, format="json"
    )
    # then: it is A's, and each tenant lists only its own
    assert answer.status_code == 201, answer.content
    assert answer.json()["tenant"] == tenant_a.pk and answer.json()["site"] == "north"
    mine = client_for(admin_a).get(URL).json()["results"]
    theirs = client_for(member_b).get(URL).json()["results"]
    assert [(d["name"], d["tenant"]) for d in mine] == [("imagenet", tenant_a.pk)]
    assert [(d["name"], d["tenant"]) for d in theirs] == [("imagenet", tenant_b.pk)]
    entry = AuditEntry.objects.get(action="dataset.create")
    assert entry.tenant_id == tenant_a.pk and entry.after["size_tb"] == 1.5


def test_another_tenants_dataset_answers_404_for_every_verb(north, south, admin_a, client_for, tenant_b):
    theirs = Dataset.objects.create(tenant=tenant_b, name="secret", site=north)
    client = client_for(admin_a)
    assert client.get(f"{URL}{theirs.pk}/").status_code == 404
    assert client.patch(f"{URL}{theirs.pk}/", {"site": "south"}, format="json").status_code == 404
    assert client.delete(f"{URL}{theirs.pk}/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.site_id == north.pk
    assert not AuditEntry.objects.filter(action__startswith="dataset.").exists()


def test_the_owner_moves_and_deletes_its_dataset(north, south, member_a, client_for, tenant_a):
    pk = client_for(member_a).post(URL, {"name": "weights", "site": "north"}, format="json").json()["id"]
    moved = client_for(member_a).patch(f"{URL}{pk}/", {"site": "south"}, format="json")
    assert moved.status_code == 200 and moved.json()["site"] == "south"
    assert client_for(member_a).delete(f"{URL}{pk}/").status_code == 204
    assert not Dataset.objects.filter(pk=pk).exists()
    actions = AuditEntry.objects.filter(action__startswith="dataset.").order_by("id").values_list("action", flat=True)
    assert list(actions) == ["dataset.create", "dataset.update", "dataset.delete"]


def test_a_duplicate_name_is_a_conflict_and_bad_input_names_the_field(north, admin_a, client_for):
    client = client_for(admin_a)
    assert client.post(URL, {"name": "corpus", "site": "north"}, format="json").status_code == 201
    again = client.post(URL, {"name": "corpus", "site": "north"}, format="json")
    assert again.status_code == 409 and "corpus" in again.json()["detail"]
    assert "site" in client.post(URL, {"name": "x", "site": "nowhere"}, format="json").json()["fields"]
    assert "size_tb" in client.post(URL, {"name": "y", "site": "north", "size_tb": -1}, format="json").json()["fields"]
    assert Dataset.objects.count() == 1


def test_operators_see_all_and_register_for_a_named_tenant(north, operator, auditor, client_for, tenant_a, tenant_b):
    Dataset.objects.create(tenant=tenant_a, name="a-data", site=north)
    Dataset.objects.create(tenant=tenant_b, name="b-data", site=north)
    assert {d["name"] for d in client_for(auditor).get(URL).json()["results"]} == {"a-data", "b-data"}
    unnamed = client_for(operator).post(URL, {"name": "c", "site": "north"}, format="json")
    assert unnamed.status_code == 400 and "tenant" in unnamed.json()["fields"]
    named = client_for(operator).post(URL, {"name": "c", "site": "north", "tenant": tenant_b.pk}, format="json")
    assert named.status_code == 201 and named.json()["tenant"] == tenant_b.pk
    assert (
        client_for(auditor).post(URL, {"name": "d", "site": "north", "tenant": tenant_b.pk}, format="json").status_code
        == 403
    )


def test_a_site_holding_datasets_is_not_deleted(north, operator, client_for, tenant_a):
    Dataset.objects.create(tenant=tenant_a, name="a-data", site=north)
    answer = client_for(operator).delete(f"/api/sites/{north.pk}/")
    assert answer.status_code == 409 and "dataset" in answer.json()["detail"]
    assert Site.objects.filter(pk=north.pk).exists()
