"""Sort, filter and CSV export of the console's tables (django-tables2 + django-filter + tablib):
all reservations, a tenant's reservation list, the audit log and the tenants; tenant-scoped
exactly like the pages, and the auditor exports what it reads."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from console.tenancy.models import AuditEntry, Tenant
from scheduling.models import Reservation
from tests.scheduling.test_reservation_pages import booked, logged_in, reserve  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def rows_of(response) -> list[dict[str, str]]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_all_reservations_sort_filter_and_csv(client, operator, booked, tenant_a, tenant_b):  # noqa: F811
    mine, theirs = booked
    logged_in(client, operator)
    url = reverse("web:reservations-all")
    by_gpus = client.get(url, {"sort": "gpus"}).content.decode()
    assert by_gpus.index(f'data-reservation="{theirs.pk}"') < by_gpus.index(f'data-reservation="{mine.pk}"')
    assert 'aria-sort="ascending"' in by_gpus and 'data-testid="sort-gpus"' in by_gpus
    desc = client.get(url, {"sort": "-gpus"}).content.decode()
    assert desc.index(f'data-reservation="{mine.pk}"') < desc.index(f'data-reservation="{theirs.pk}"')
    assert 'aria-sort="descending"' in desc
    # the export link keeps filters and sort
    filtered = client.get(url, {"tenant": tenant_b.pk, "sort": "-gpus"}).content.decode()
    assert "_export=csv" in filtered and f"tenant={tenant_b.pk}" in filtered.split("_export=csv")[0].rsplit('"', 1)[-1]
    response = client.get(url, {"_export": "csv", "sort": "-gpus"})
    assert 'filename="reservations-all-' in response["Content-Disposition"]
    rows = rows_of(response)
    assert [(r["Reservation"], r["Tenant"], r["GPUs"], r["P_Key"]) for r in rows] == [
        ("a-train", tenant_a.name, "16", f"0x{mine.pkey:04x}"),
        ("b-infer", tenant_b.name, "8", f"0x{theirs.pkey:04x}"),
    ]
    only_b = rows_of(client.get(url, {"_export": "csv", "tenant": tenant_b.pk}))
    assert [r["Reservation"] for r in only_b] == ["b-infer"]
    text = rows_of(client.get(url, {"_export": "csv", "q": "a-tr"}))
    assert [r["Status"] for r in text] == [Reservation.Status.PROVISIONING]


def test_tenant_list_and_csv_name_nothing_of_another_tenant(client, admin_a, booked, tenant_b):  # noqa: F811
    mine, theirs = booked
    logged_in(client, admin_a)
    url = reverse("web:reservations-list")
    page = client.get(url).content.decode()
    assert f'data-reservation="{mine.pk}"' in page and f'data-reservation="{theirs.pk}"' not in page
    assert tenant_b.name not in page and "b-infer" not in page
    response = client.get(url, {"_export": "csv"})
    assert (
        "reservations-tenant-a-" in response["Content-Disposition"]
        or mine.tenant.slug in response["Content-Disposition"]
    )
    rows = rows_of(response)
    assert [r["Reservation"] for r in rows] == ["a-train"] and "Tenant" not in rows[0]
    body = response.content.decode()
    assert tenant_b.name not in body and "b-infer" not in body and theirs.partition_name not in body
    # asking for the other tenant by filter gives nothing of it either
    assert tenant_b.name not in client.get(url, {"_export": "csv", "tenant": tenant_b.pk}).content.decode()
    assert client.get(reverse("web:reservations-all"), {"_export": "csv"}).status_code == 404


def test_audit_log_words_code_column_filter_and_csv(client, operator, admin_a, booked, tenant_a, tenant_b):  # noqa: F811
    logged_in(client, operator)
    url = reverse("web:audit")
    page = client.get(url).content.decode()
    assert "reserved reservation a-train (16 GPUs) on fabric" in page
    assert "<code>reservation.create</code>" in page
    rows = rows_of(client.get(url, {"_export": "csv", "action": "reservation.", "sort": "action"}))
    expected = AuditEntry.objects.filter(action__startswith="reservation.").count()
    assert len(rows) == expected >= 2
    assert {r["Action code"] for r in rows} == {"reservation.create"}
    # on screen the sentence names the object, so the table fits the page; the CSV keeps type and id
    assert {"Object type", "Object id"} <= rows[0].keys()
    assert 'data-testid="sort-object_type"' not in page and 'data-testid="sort-action"' in page
    fabric = booked[1].fabric.name
    assert {r["What happened"] for r in rows} == {
        f"tests reserved reservation a-train (16 GPUs) on fabric {fabric}",
        f"tests reserved reservation b-infer (8 GPUs) on fabric {fabric}",
    }
    assert {r["Tenant"] for r in rows} == {tenant_a.name, tenant_b.name}
    # a tenant admin's audit CSV: its own tenant's entries, no tenant column, nothing of tenant B
    logged_in(client, admin_a)
    response = client.get(url, {"_export": "csv"})
    assert 'filename="audit-log-' in response["Content-Disposition"]
    mine = rows_of(response)
    assert len(mine) == AuditEntry.objects.filter(tenant=tenant_a).count() >= 1
    assert "Tenant" not in mine[0]
    body = response.content.decode()
    assert "b-infer" not in body and tenant_b.name not in body
    assert tenant_b.name not in client.get(url).content.decode()
    # the overview's recent changes read the same sentences, the code beside them
    home = client.get(reverse("web:home")).content.decode()
    assert "tests reserved reservation a-train (16 GPUs) on fabric" in home and "b-infer" not in home
    assert "<code>reservation.create</code>" in home


def test_tenants_table_sorts_filters_and_exports(client, operator, tenant_a, tenant_b):
    logged_in(client, operator)
    url = reverse("web:tenants")
    rows = rows_of(client.get(url, {"_export": "csv", "sort": "-name"}))
    names = list(Tenant.objects.order_by("-name").values_list("name", flat=True))
    assert [r["Name"] for r in rows] == names and len(names) >= 2
    assert {r["Active"] for r in rows} == {"yes"}
    assert rows_of(client.get(url, {"_export": "csv", "q": tenant_b.slug}))[0]["Slug"] == tenant_b.slug
    assert len(rows_of(client.get(url, {"_export": "csv", "q": tenant_b.slug}))) == 1
    Tenant.objects.filter(pk=tenant_b.pk).update(is_active=False)
    inactive = rows_of(client.get(url, {"_export": "csv", "is_active": "false"}))
    assert [r["Name"] for r in inactive] == [tenant_b.name]
    assert tenant_b.name not in {r["Name"] for r in rows_of(client.get(url, {"_export": "csv", "is_active": "true"}))}
    assert '<option value="" selected>any</option>' in client.get(url).content.decode()


@pytest.mark.parametrize("name", ["web:reservations-all", "web:audit", "web:tenants", "web:reservations-list"])
def test_auditor_exports_what_it_reads_and_cannot_write(client, auditor, booked, name):  # noqa: F811
    logged_in(client, auditor)
    rows = rows_of(client.get(reverse(name), {"_export": "csv"}))
    assert rows
    assert client.post(reverse(name), {"_export": "csv", "name": "x"}).status_code in (403, 405)


def test_change_list_csv_keeps_the_status_filter_and_order(client, operator):
    from console.fabric.models import ChangeRequest
    from tests.fabric.test_change_list import finish, new_change
    from tests.scheduling.conftest import make_fabric

    fabric = make_fabric("chg-csv", {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"})
    failed = finish(new_change(fabric, "partition for res-7"), ChangeRequest.Status.FAILED, minutes_ago=25)
    applied = finish(new_change(fabric, "port disabled"), ChangeRequest.Status.APPLIED, restarted=True, minutes_ago=10)
    new_change(fabric, "waiting")
    logged_in(client, operator)
    url = reverse("web:fabric-changes", args=[fabric.pk])
    page = client.get(url, {"status": ["failed", "applied"]}).content.decode()
    assert "_export=csv" in page
    response = client.get(url, {"status": ["failed", "applied"], "ordering": "created_at", "_export": "csv"})
    assert 'filename="changes-chg-csv-' in response["Content-Disposition"]
    rows = rows_of(response)
    assert [(r["Change"], r["Reason"], r["Restarted OpenSM"]) for r in rows] == [
        (str(failed.pk), "partition for res-7", "no"),
        (str(applied.pk), "port disabled", "yes"),
    ]
