"""The change requests of a fabric: a list page (filters shared with the API, sorting,
pagination), links to it from the fabric, live and reservation pages, and a push that restarted
OpenSM flagged on the list and the change page.

Rows are made by the real request service (desired state built from the fabric's partitions and
its reservations) and finished the way the pipeline writes an outcome."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from console.fabric import changes
from console.fabric.models import ChangeRequest, FabricPartition
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from scheduling.models import Reservation
from scheduling.services import reservations
from tests.scheduling.conftest import give_quota, make_fabric, make_pool, request_for

pytestmark = pytest.mark.django_db

SYSTEM = Actor.system("tests")
OPERATOR = Principal(None, Role.OPERATOR, None)
Status = ChangeRequest.Status


@pytest.fixture
def fabric():
    return make_fabric("chg8", {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"})


def finish(change: ChangeRequest, status: str, *, restarted: bool = False, minutes_ago: int = 0) -> ChangeRequest:
    """End ``change`` as the pipeline's ``finalize`` does: a status and an outcome."""
    when = timezone.now() - dt.timedelta(minutes=minutes_ago)
    change.status = status
    change.outcome = {"result": status, "opensm_restarted": restarted, "mismatches": [], "problems": []}
    change.error = "mismatch on leaf-01" if status == Status.FAILED else ""
    change.finished_at = when
    change.save()
    ChangeRequest.objects.filter(pk=change.pk).update(created_at=when)  # auto_now_add: set afterwards
    change.refresh_from_db()
    return change


def new_change(fabric, reason: str = "") -> ChangeRequest:
    return changes.request_change(SYSTEM, OPERATOR, fabric, reason=reason)


def listed(response) -> list[int]:
    assert response.status_code == 200, response.content[:300]
    return [int(x) for x in re.findall(r'data-testid="change-row" data-change="(\d+)"', response.content.decode())]


@pytest.fixture
def rows(fabric):
    """applied (restarted OpenSM, 30 min ago), failed (20), applied (10), queued (now)."""
    restarted = finish(new_change(fabric, "qos class"), Status.APPLIED, restarted=True, minutes_ago=30)
    failed = finish(new_change(fabric, "bad"), Status.FAILED, minutes_ago=20)
    applied = finish(new_change(fabric, "partition"), Status.APPLIED, minutes_ago=10)
    queued = new_change(fabric, "waiting")
    return {"restarted": restarted, "failed": failed, "applied": applied, "queued": queued}


def test_the_list_filters_by_status_restart_and_partition_like_the_api(client, operator, fabric, rows):
    client.force_login(operator)
    page = reverse("web:fabric-changes", args=[fabric.pk])
    api = f"/api/fabrics/{fabric.pk}/changes/"
    ids = {k: v.pk for k, v in rows.items()}
    # newest first by default
    assert listed(client.get(page)) == [ids["queued"], ids["applied"], ids["failed"], ids["restarted"]]
    cases = {
        "status=failed": [ids["failed"]],
        "status=applied&status=queued": [ids["queued"], ids["applied"], ids["restarted"]],
        "opensm_restarted=true": [ids["restarted"]],
        "opensm_restarted=false": [ids["queued"], ids["applied"], ids["failed"]],
        "status=applied&opensm_restarted=false": [ids["applied"]],
        "ordering=created_at": [ids["restarted"], ids["failed"], ids["applied"], ids["queued"]],
    }
    for query, expected in cases.items():
        assert listed(client.get(f"{page}?{query}")) == expected, query
        from_api = [row["id"] for row in client.get(f"{api}?{query}").json()["results"]]
        assert from_api == expected, ("api", query)
    # another fabric's changes are not listed
    other = make_fabric("chg-other", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    stray = new_change(other)
    assert stray.pk not in listed(client.get(page))


def test_sorting_by_finish_time_and_the_column_links(client, operator, fabric, rows):
    client.force_login(operator)
    page = reverse("web:fabric-changes", args=[fabric.pk])
    body = client.get(f"{page}?status=applied&status=failed&ordering=finished_at").content.decode()
    assert listed_ids(body) == [rows["restarted"].pk, rows["failed"].pk, rows["applied"].pk]
    # the header link keeps the filters and flips the direction of the current sort
    link = re.search(r'href="([^"]+)" data-testid="sort-finished"', body).group(1).replace("&amp;", "&")
    assert "ordering=-finished_at" in link and "status=applied" in link and "status=failed" in link
    assert listed(client.get(page + link)) == [rows["applied"].pk, rows["failed"].pk, rows["restarted"].pk]


def listed_ids(body: str) -> list[int]:
    return [int(x) for x in re.findall(r'data-testid="change-row" data-change="(\d+)"', body)]


def test_the_list_is_paginated(client, operator, fabric):
    client.force_login(operator)
    made = [finish(new_change(fabric), Status.UNCHANGED, minutes_ago=i).pk for i in range(53)]
    page = reverse("web:fabric-changes", args=[fabric.pk])
    first = client.get(page)
    assert listed(first) == made[:50]
    assert "page 1 of 2" in first.content.decode()
    assert listed(client.get(f"{page}?page=2")) == made[50:]


def test_a_restart_is_flagged_on_the_list_and_the_change_page(client, operator, fabric, rows):
    client.force_login(operator)
    body = client.get(reverse("web:fabric-changes", args=[fabric.pk])).content.decode()
    flagged = re.findall(r'data-change="(\d+)"[^>]*class="row-restarted"', body)
    assert flagged == [str(rows["restarted"].pk)]
    assert body.count('data-testid="restart-badge"') == 1
    restarted = client.get(reverse("web:fabric-change", args=[fabric.pk, rows["restarted"].pk])).content.decode()
    assert 'data-testid="restart-banner"' in restarted and "This push restarted OpenSM" in restarted
    plain = client.get(reverse("web:fabric-change", args=[fabric.pk, rows["applied"].pk])).content.decode()
    assert 'data-testid="restart-banner"' not in plain
    assert client.get(f"/api/fabrics/{fabric.pk}/changes/{rows['restarted'].pk}/").json()["opensm_restarted"] is True


def test_operators_and_auditors_read_the_list_tenants_do_not(client, fabric, rows, operator, auditor, admin_a):
    page = reverse("web:fabric-changes", args=[fabric.pk])
    for user in (operator, auditor):
        client.force_login(user)
        response = client.get(page)
        assert len(listed(response)) == 4
        main = response.content.decode().split("<main", 1)[1]
        assert 'method="post"' not in main  # a list to read: nothing to post
    client.force_login(admin_a)
    assert client.get(page).status_code == 404
    client.force_login(operator)
    assert client.get(reverse("web:fabric-changes", args=[fabric.pk + 999])).status_code == 404


def test_the_fabric_page_and_the_change_page_link_to_the_list(client, operator, fabric, rows):
    client.force_login(operator)
    target = reverse("web:fabric-changes", args=[fabric.pk])
    fabric_page = client.get(reverse("web:fabric", args=[fabric.pk]) + "?discover=false").content.decode()
    assert f'href="{target}" data-testid="fabric-changes-link"' in fabric_page
    change_page = client.get(reverse("web:fabric-change", args=[fabric.pk, rows["failed"].pk])).content.decode()
    assert f'href="{target}" data-testid="all-changes-link"' in change_page
    # never discovered and no sweep asked for: a plain statement, not a red error in CLI words
    assert "No discovery yet." in fabric_page
    assert 'data-testid="compare-error"' not in fabric_page


def test_the_live_page_links_operators_to_the_list(client, operator, admin_a, fabric):
    target = reverse("web:fabric-changes", args=[fabric.pk])
    client.force_login(operator)
    live = client.get(reverse("web:fabric-live", args=[fabric.pk]) + "?level=fabric").content.decode()
    assert f'href="{target}" data-testid="live-changes-link"' in live


def test_a_reservation_links_to_the_change_that_carried_its_partition(client, operator, tenant_a, fabric):
    pool = make_pool(fabric)
    give_quota(tenant_a, pool, 16)
    reservation = reservations.reserve(
        SYSTEM, Principal(None, Role.TENANT_ADMIN, tenant_a.pk), request_for(pool, gpus=8, name="train")
    )
    assert reservation.status == Reservation.Status.PROVISIONING, reservation.reason
    detail = reverse("web:reservation", args=[reservation.pk])
    client.force_login(operator)
    # given no change has carried it yet, the page says so
    assert "no change request has carried partition" in client.get(detail).content.decode()
    # given a manual partition pushed before, a failed push and then an applied one carrying it
    FabricPartition.objects.create(fabric=fabric, name="manual", pkey=0x300, members=[])
    carried_failed = finish(new_change(fabric), Status.FAILED, minutes_ago=5)
    carried = finish(new_change(fabric), Status.APPLIED, minutes_ago=1)
    later = finish(new_change(fabric), Status.APPLIED)
    assert {p["name"] for p in carried.desired["partitions"]} >= {reservation.partition_name, "manual"}
    body = client.get(detail).content.decode()
    link = reverse("web:fabric-change", args=[fabric.pk, carried.pk])
    assert f'href="{link}" data-testid="carrying-change-link"' in body
    # every change carrying it: the list filtered by the partition's name
    changes_link = re.search(r'href="([^"]+)" data-testid="reservation-changes-link"', body).group(1)
    assert listed(client.get(changes_link.replace("&amp;", "&"))) == [later.pk, carried.pk, carried_failed.pk]


def test_changes_finished_before_the_flag_are_backfilled_from_their_step_log(fabric):
    from importlib import import_module

    from django.apps import apps

    from console.fabric.models import ChangeStep

    backfill = import_module("console.fabric.migrations.0004_backfill_opensm_restarted").backfill
    # given two changes finished by an older pipeline: one restarted OpenSM (its QoS step says so)
    old_restart, old_reload = new_change(fabric), new_change(fabric)
    for change, log in (
        (old_restart, "restarting OpenSM: non-reloadable options changed: qos_policy_file"),
        (old_reload, "SIGHUP sent"),
    ):
        ChangeRequest.objects.filter(pk=change.pk).update(status=Status.APPLIED, outcome={"result": "verified"})
        ChangeStep.objects.create(change=change, seq=9, name="qos", status="ok", log=log)
    # when the migration runs
    backfill(apps, None)
    # then the restart is flagged and the reload is not; an unfinished change is left alone
    assert ChangeRequest.objects.get(pk=old_restart.pk).opensm_restarted
    assert ChangeRequest.objects.get(pk=old_reload.pk).outcome["opensm_restarted"] is False
    assert "opensm_restarted" not in ChangeRequest.objects.get(pk=new_change(fabric).pk).outcome
