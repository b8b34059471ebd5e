"""The reservation pages through the Django client: who sees which page, 404 for other tenants'
reservations and for roles a page does not exist for, the quotas editor and the occupancy map.

The fabric is the 16-node fat tree of ``tests/scheduling/conftest.py`` (4 leaves × 4 DGX H100).
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from console.tenancy.context import Actor
from console.tenancy.models import Principal
from scheduling.models import Quota, Reservation
from scheduling.services import reservations
from tests.scheduling.conftest import give_quota, request_for

pytestmark = pytest.mark.django_db

SYSTEM = Actor.system("tests")


def logged_in(client, user):
    client.force_login(user)
    return client


def reserve(tenant, pool, gpus: int, **kw) -> Reservation:
    principal = Principal(None, "tenant-admin", tenant.pk)
    return reservations.reserve(SYSTEM, principal, request_for(pool, gpus=gpus, **kw))


def page_init(response) -> dict:
    html = response.content.decode()
    start = html.index('id="reservations-init"')
    body = html[html.index(">", start) + 1 : html.index("</script>", start)]
    return json.loads(body)


@pytest.fixture
def booked(pool, tenant_a, tenant_b):
    """Tenant A holds 16 GPUs (2 nodes), tenant B 8 GPUs, both placed now."""
    give_quota(tenant_a, pool, 64, 16)
    give_quota(tenant_b, pool, 32)
    mine = reserve(tenant_a, pool, 16, name="a-train")
    theirs = reserve(tenant_b, pool, 8, name="b-infer")
    assert mine.status == theirs.status == Reservation.Status.PROVISIONING
    return mine, theirs


def test_tenant_page_carries_its_own_tenant_pools_and_no_tenant_list(client, member_a, booked):
    # given a tenant member
    response = logged_in(client, member_a).get(reverse("web:reservations"))
    # then the page exists, is the active nav entry and carries the form's data
    assert response.status_code == 200
    assert b'data-nav="reservations" aria-current="page"' in response.content
    init = page_init(response)
    assert init["tenant"]["name"] == "Tenant A"
    assert init["tenants"] == []  # tenant users never learn other tenants' names
    assert [p["name"] for p in init["pools"]] == ["all"]
    assert init["pools"][0]["gpus"] == 128 and init["pools"][0]["gpu_models"]
    assert init["can_write"] and not init["is_operator"]
    assert b"Tenant B" not in response.content
    assert b'data-testid="reserve-form"' in response.content


def test_operator_reserves_for_any_tenant_and_sees_operator_tabs(client, operator, booked):
    response = logged_in(client, operator).get(reverse("web:reservations"))
    init = page_init(response)
    assert [t["name"] for t in init["tenants"]] == ["Tenant A", "Tenant B"]
    assert b'data-testid="res-tenant"' in response.content
    for key in ("all", "quotas", "occupancy"):
        assert f'data-tab="{key}"'.encode() in response.content


def test_auditor_reads_every_reservation_page_and_users_without_role_get_404(
    client, auditor, django_user_model, tenant_a, tenant_b
):
    logged_in(client, auditor)
    for name in ("web:reservations", "web:reservations-all", "web:reservation-quotas", "web:reservation-occupancy"):
        assert client.get(reverse(name)).status_code == 200, name
    init = page_init(client.get(reverse("web:reservations")))
    assert init["can_write"] is False and [t["name"] for t in init["tenants"]] == ["Tenant A", "Tenant B"]
    nobody = django_user_model.objects.create_user("nobody", password="pw-12345678")
    assert logged_in(client, nobody).get(reverse("web:reservations")).status_code == 404


def test_anonymous_is_sent_to_login(client):
    response = client.get(reverse("web:reservations"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_detail_of_own_reservation_shows_partition_and_connection(client, admin_a, booked):
    mine, _ = booked
    response = logged_in(client, admin_a).get(reverse("web:reservation", args=[mine.pk]))
    assert response.status_code == 200
    init = page_init(response)
    assert init["reservation"]["pkey_hex"] == f"0x{mine.pkey:04x}"
    assert init["reservation"]["status"] == "provisioning"
    nodes = init["connection"]
    assert [n["node"] for n in nodes] == sorted(mine.placement["nodes"])
    assert all(len(n["gpus"]) == 8 and n["hcas"] for n in nodes)
    assert all(h["port_guid"].startswith("0x") for n in nodes for h in n["hcas"])
    connection = client.get(reverse("web:reservation-connection", args=[mine.pk])).json()
    assert connection["nodes"] == nodes


def test_other_tenants_reservation_is_404_on_every_page(client, admin_b, member_b, booked):
    mine, theirs = booked
    for user in (admin_b, member_b):
        logged_in(client, user)
        assert client.get(reverse("web:reservation", args=[mine.pk])).status_code == 404
        url = reverse("web:reservation-connection", args=[mine.pk])
        assert client.get(url).status_code == 404
        assert client.get(reverse("web:reservation", args=[theirs.pk])).status_code == 200
    assert client.get(reverse("web:reservation", args=[999_999])).status_code == 404


def test_operator_sees_any_reservation_and_filters_all(client, operator, booked, tenant_b):
    mine, theirs = booked
    logged_in(client, operator)
    assert client.get(reverse("web:reservation", args=[mine.pk])).status_code == 200
    everything = client.get(reverse("web:reservations-all")).content.decode()
    assert f'data-reservation="{mine.pk}"' in everything
    assert f'data-reservation="{theirs.pk}"' in everything
    only_b = client.get(reverse("web:reservations-all"), {"tenant": tenant_b.pk}).content.decode()
    assert f'data-reservation="{mine.pk}"' not in only_b
    assert f'data-reservation="{theirs.pk}"' in only_b
    ready = client.get(reverse("web:reservations-all"), {"status": "ready"}).content.decode()
    assert "data-reservation=" not in ready and "No reservations match." in ready


def test_tenants_never_see_operator_pages(client, admin_a, member_a, booked):
    for user in (admin_a, member_a):
        logged_in(client, user)
        for name in ("web:reservations-all", "web:reservation-quotas", "web:reservation-occupancy"):
            assert client.get(reverse(name)).status_code == 404, (user, name)
        assert b'data-tab="occupancy"' not in client.get(reverse("web:reservations")).content


def test_quota_editor_sets_and_refuses_with_the_reason(client, operator, pool, booked, tenant_a):
    logged_in(client, operator)
    page = client.get(reverse("web:reservation-quotas")).content.decode()
    assert page.count('data-testid="quota-row"') == 2
    # when the operator raises tenant A's guarantee
    response = client.post(
        reverse("web:reservation-quotas"),
        {
            "tenant": tenant_a.pk,
            "pool": pool.pk,
            "guaranteed_gpus": 72,
            "borrow_limit_gpus": 8,
        },
        follow=True,
    )
    quota = Quota.objects.get(tenant=tenant_a, pool=pool)
    assert (quota.guaranteed_gpus, quota.borrow_limit_gpus) == (72, 8)
    assert b"72 guaranteed + 8 borrowable" in response.content
    # when the limit would fall below what tenant A holds (16 GPUs), it is refused with why
    response = client.post(
        reverse("web:reservation-quotas"),
        {
            "tenant": tenant_a.pk,
            "pool": pool.pk,
            "guaranteed_gpus": 8,
            "borrow_limit_gpus": 0,
        },
        follow=True,
    )
    assert b"holds up to 16 GPUs" in response.content
    assert Quota.objects.get(tenant=tenant_a, pool=pool).guaranteed_gpus == 72


def test_quota_editor_sets_keeps_and_clears_a_shaped_guarantee(client, operator, pool, tenant_a):
    logged_in(client, operator)
    url = reverse("web:reservation-quotas")
    post = {"tenant": tenant_a.pk, "pool": pool.pk, "guaranteed_gpus": 64, "borrow_limit_gpus": 0}
    # given a guarantee of one whole leaf group set in the editor
    client.post(url, {**post, "guaranteed_leaf_groups": 1})
    assert Quota.objects.get(tenant=tenant_a, pool=pool).guaranteed_leaf_groups == 1
    # the editor shows it, so saving the row again keeps it
    page = client.get(url).content.decode()
    assert 'data-testid="quota-leaf-groups" value="1"' in page
    client.post(url, {**post, "borrow_limit_gpus": 8, "guaranteed_leaf_groups": "1"})
    assert Quota.objects.get(tenant=tenant_a, pool=pool).guaranteed_leaf_groups == 1
    # and emptying the field removes it
    client.post(url, {**post, "guaranteed_leaf_groups": ""})
    assert Quota.objects.get(tenant=tenant_a, pool=pool).guaranteed_leaf_groups is None


def test_occupancy_map_colours_nodes_by_tenant(client, operator, pool, booked):
    mine, theirs = booked
    page = logged_in(client, operator).get(reverse("web:reservation-occupancy")).content.decode()
    assert page.count('data-testid="occupancy-group"') == 4  # one per leaf
    assert page.count('data-testid="occupancy-cell"') == 16
    for node in mine.placement["nodes"]:
        assert f'data-node="{node}" data-tenant="Tenant A"' in page
    for node in theirs.placement["nodes"]:
        assert f'data-node="{node}" data-tenant="Tenant B"' in page
    assert page.count('data-testid="legend-item"') == 2
    assert page.count('data-tenant=""') == 16 - 3  # the rest is free
    missing = client.get(reverse("web:reservation-occupancy"), {"pool": 999_999})
    assert missing.status_code == 404


def test_finished_reservations_are_a_compact_table_and_the_cards_are_the_live_ones(client, client_for, admin_a, booked):
    mine, theirs = booked
    done = reserve(mine.tenant, mine.pool, 8, name="a-done")
    Reservation.objects.filter(pk=done.pk).update(status=Reservation.Status.RELEASED)  # wound down since
    # the API's cards query: live ones only; finished ones apart
    api = client_for(admin_a)
    live = [r["name"] for r in api.get("/api/reservations/", {"state": "live"}).json()["results"]]
    over = [r["name"] for r in api.get("/api/reservations/", {"state": "finished"}).json()["results"]]
    assert live == ["a-train"] and over == ["a-done"]
    page = logged_in(client, admin_a).get(reverse("web:reservations")).content.decode()
    table = page[page.index('data-testid="finished-reservations"') :]
    assert table.count('data-testid="all-row"') == 1 and "a-done" in table and "a-train" not in table
    assert "b-infer" not in page  # nothing of another tenant's
