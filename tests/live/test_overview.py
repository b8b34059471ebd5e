"""The dashboard's figures (``GET /api/overview/`` and the operator's ``/``) against data made
here: a live snapshot written by the collector's own publisher with one link down, open and
resolved alarms, a discovery that found a slow link and a missing one, change requests, two
tenants' ready reservations and a failed GPU. A tenant's version names nothing of the other."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.utils import timezone

from console.fabric.models import ChangeRequest, DiscoveryRun
from console.telemetry import store
from console.telemetry.models import FabricEvent
from console.tenancy.models import Principal, Role
from scheduling.models import GPU, Node, Reservation
from scheduling.services import lifecycle
from scheduling.services.reservations import ReservationRequest, reserve
from tests.live.fabric_fixtures import statuses
from tests.live.helpers import SYSTEM

pytestmark = pytest.mark.django_db

KEYS = {"fabrics", "gpus", "reservations", "changes"}
FABRIC_KEYS = {
    "id",
    "name",
    "site",
    "sm_state",
    "links_down",
    "links_degraded",
    "alarms_open",
    "drift",
    "validation",
    "ports_isolated",
}


@pytest.fixture
def dashboard(world):
    fabric, collector = world["fabric"], world["collector"]
    # given one link down in the snapshot the collector leaves for the web processes, collector alive
    down = sorted(collector.lm.ends)[0]
    collector.sm = {"state": "MASTER", "priority": 15, "lid": 1, "configured": "ftree", "in_use": "ftree", "at": 1.0}
    collector._snapshot(statuses(collector, down={down}), time.time(), 0.01)
    store.heartbeat(fabric.pk, 30)
    # two open alarms (one critical, one warning) and a resolved one
    now = timezone.now()
    for kind, subject, severity, status in [
        (FabricEvent.Kind.LINK_DOWN, down, "critical", "open"),
        (FabricEvent.Kind.LINK_ERRORS, "x/1", "warning", "acknowledged"),
        (FabricEvent.Kind.LINK_DOWN, "x/2", "critical", "resolved"),
    ]:
        event = FabricEvent.objects.create(
            fabric=fabric,
            kind=kind,
            subject=subject,
            severity=severity,
            status=status,
            message=f"{kind} {subject}",
            reservations=[world["res_b"].pk],
            opened_at=now,
        )
        event.tenants.set([world["b"]])
    # the last discovery: one link below its designed rate, one missing (an older one counts not)
    DiscoveryRun.objects.create(fabric=fabric, compare={"missing": [{}, {}, {}], "mismatches": []})
    DiscoveryRun.objects.create(
        fabric=fabric,
        compare={"missing": [{"a": "x"}], "extra": [], "miswired": [], "mismatches": [{"kind": "rate"}]},
    )
    for status in ("queued", "pending_approval", "failed", "rolled_back", "applied"):
        ChangeRequest.objects.create(fabric=fabric, status=status)
    # one failed GPU on a node nobody holds
    held = Reservation.objects.filter(fabric=fabric).values("allocations__gpu")
    failed = GPU.objects.filter(node__fabric=fabric, index=0).exclude(pk__in=held).order_by("node__name").first()
    failed.health = GPU.Health.FAILED
    failed.save(update_fields=["health"])
    yield {**world, "down": down}
    store._redis().delete(store._key("snap", fabric.pk), store._key("beat", fabric.pk))


def test_operator_overview_has_the_documented_keys_and_values(dashboard, operator, client):
    client.force_login(operator)
    body = client.get("/api/overview/").json()
    assert set(body) == KEYS
    (row,) = body["fabrics"]
    assert set(row) == FABRIC_KEYS
    assert row == {
        "id": dashboard["fabric"].pk,
        "name": dashboard["fabric"].name,
        "site": None,
        "sm_state": "MASTER",
        "links_down": 1,
        "links_degraded": 1,
        "alarms_open": 2,
        "drift": 2,
        "validation": {"id": None, "ok": None, "failed": [], "at": None},
        "ports_isolated": 0,
    }
    total = GPU.objects.filter(node__fabric=dashboard["fabric"]).count()
    held = dashboard["res_a"].gpus + dashboard["res_b"].gpus
    assert body["gpus"] == {"total": total, "allocated": held, "free": total - held - 1, "down": 1}
    assert body["reservations"] == {"provisioning": 0, "ready": 2, "failed": 0}
    assert body["changes"] == {"pending": 2, "failed": 2}


def test_a_stopped_collector_reports_no_links_down_and_an_unknown_sm(dashboard, operator, client):
    store._redis().delete(store._key("beat", dashboard["fabric"].pk))
    client.force_login(operator)
    (row,) = client.get("/api/overview/").json()["fabrics"]
    assert row["sm_state"] == "unknown" and row["links_down"] == 0


def test_operator_page_links_each_figure_to_its_list(dashboard, operator, client):
    client.force_login(operator)
    html = client.get("/").content.decode()
    fabric = dashboard["fabric"]
    leaf = dashboard["down"].rsplit("/", 1)[0]
    assert f'href="/fabrics/{fabric.pk}/live/?switch={leaf}">{dashboard["down"]}</a>' in html
    assert 'href="/reservations/all/?status=ready" data-testid="res-ready">2</a>' in html
    assert "MASTER" in html and "ftree / ftree" in html
    assert 'id="dashboard"' in html


def test_tenant_overview_is_its_own_and_names_nothing_of_the_other(dashboard, admin_a, client):
    client.force_login(admin_a)
    body = client.get("/api/overview/").json()
    assert set(body) == KEYS
    assert body["fabrics"] == []  # fabric-wide figures would tell of other tenants
    res_a = dashboard["res_a"]
    assert body["gpus"] == {"total": 64, "allocated": res_a.gpus, "free": 64 - res_a.gpus, "down": 0}
    assert body["reservations"] == {"provisioning": 0, "ready": 1, "failed": 0}
    html = client.get("/").content.decode()
    res_b = dashboard["res_b"]
    other_nodes = set(res_b.allocations.values_list("node__name", flat=True))
    for text in (body.__repr__(), html):
        assert "Tenant B" not in text and "tenant-b" not in text
        assert res_b.partition_name not in text
        assert not any(f">{name}<" in text or f'"{name}"' in text for name in other_nodes)
        assert dashboard["fabric"].name not in text
    # the events touching tenant B are not A's
    assert "link_down" not in html and dashboard["down"] not in html


def test_tenant_b_sees_the_events_touching_it(dashboard, admin_b, client):
    client.force_login(admin_b)
    html = client.get("/").content.decode()
    assert f"link_down {dashboard['down']}" in html  # open, touching B
    assert "x/2" not in html  # resolved


def test_a_failed_push_moves_a_reservation_from_provisioning_to_failed(dashboard, operator, admin_a, admin_b, client):
    fabric, tenant = dashboard["fabric"], dashboard["a"]
    principal = Principal(None, Role.TENANT_ADMIN, tenant.pk)
    pool = fabric.pools.get()
    waiting = reserve(SYSTEM, principal, ReservationRequest(pool_id=pool.pk, nodes=1, duration=dt.timedelta(hours=1)))
    assert waiting.status == Reservation.Status.PROVISIONING
    client.force_login(operator)
    assert client.get("/api/overview/").json()["reservations"] == {"provisioning": 1, "ready": 2, "failed": 0}
    # when the change carrying its partition fails
    lifecycle.fabric_failed(fabric.pk, 7, "boom")
    # then it counts as failed, for the operator and for its tenant, and not for the other tenant
    assert client.get("/api/overview/").json()["reservations"] == {"provisioning": 0, "ready": 2, "failed": 1}
    client.force_login(admin_a)
    assert client.get("/api/overview/").json()["reservations"] == {"provisioning": 0, "ready": 1, "failed": 1}
    client.force_login(admin_b)
    assert client.get("/api/overview/").json()["reservations"] == {"provisioning": 0, "ready": 1, "failed": 0}


def test_the_auditor_reads_the_operators_figures(dashboard, operator, auditor, client):
    client.force_login(operator)
    seen_by_operator = client.get("/api/overview/").json()
    client.force_login(auditor)
    assert client.get("/api/overview/").json() == seen_by_operator
    assert f'data-testid="dash-fabric-{dashboard["fabric"].pk}"' in client.get("/").content.decode()


def test_links_of_nodes_powered_off_on_purpose_are_not_counted_as_down(dashboard, operator, client):
    fabric, collector = dashboard["fabric"], dashboard["collector"]
    node = Node.objects.filter(fabric=fabric).order_by("name").first()
    its_links = {f"{leaf}/{port}" for leaf, port in node.hcas.values_list("leaf", "leaf_port")}
    assert len(its_links) == 8 and its_links <= set(collector.lm.ends)
    collector._snapshot(statuses(collector, down={dashboard["down"], *its_links}), time.time(), 0.01)
    client.force_login(operator)

    def links_down() -> int:
        return client.get("/api/overview/").json()["fabrics"][0]["links_down"]

    # a node whose links went down on their own: eight failures more
    assert links_down() == 9
    # the same node powered off on purpose: its links are down as intended, not failures
    for state in (Node.Power.OFF, Node.Power.POWERING_OFF, Node.Power.POWERING_ON):
        Node.objects.filter(pk=node.pk).update(power_state=state)
        assert links_down() == 1, state
    page = client.get("/").content.decode()
    assert 'data-testid="links-off">8 off on purpose' in page
    # a node whose power action failed is a failure again
    Node.objects.filter(pk=node.pk).update(power_state=Node.Power.FAILED)
    assert links_down() == 9


def test_a_tenants_gpus_count_each_gpu_once_across_overlapping_pools(dashboard, admin_a, client):
    from scheduling.services import inventory, quotas

    fabric, tenant_a = dashboard["fabric"], dashboard["a"]
    # a second pool over the two nodes tenant B holds (it overlaps "all"), where A may borrow 64
    held_by_b = list(Node.objects.filter(pk__in=dashboard["res_b"].allocations.values("node")))
    pair = inventory.create_pool(
        SYSTEM, Principal(None, Role.OPERATOR, None), fabric=fabric, name="pair", nodes=held_by_b
    )
    quotas.set_quota(
        SYSTEM,
        Principal(None, Role.OPERATOR, None),
        tenant=tenant_a,
        pool=pair,
        guaranteed_gpus=0,
        borrow_limit_gpus=64,
    )
    client.force_login(admin_a)
    body = client.get("/api/overview/").json()
    used = dashboard["res_a"].gpus
    # the limits added up (64 + 64) would say 128 total and 112 free; the pair holds 16 GPUs,
    # all of them B's: A reaches 64 + 16 and can get only what "all" has room for
    assert body["gpus"]["total"] == 64 + 16
    assert body["gpus"]["free"] == 64 - used
    rows = {r["pool"]: r for r in client.get("/").context["overview"]["detail"]["quotas"]}
    assert (rows["pair"]["pool_gpus"], rows["pair"]["can_get"]) == (16, 0)
    assert rows["all"]["can_get"] == 64 - used
    page = client.get("/").content.decode()
    assert page.count('data-testid="quota-row"') == 2 and "a GPU counts once" in page
