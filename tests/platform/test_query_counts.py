"""Query-count guards: a list page or list endpoint costs the same number of queries for 2 rows
as for 6 (no N+1), so its cost does not grow with the data.

Each guard renders the list once over a small world (2 tenants, pools, reservations, …), grows the
world to 6 of everything, and asserts with ``django_assert_max_num_queries`` that the second
rendering took no more queries than the first. An N+1 adds at least 4 queries there.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console.fabric.discovery import services as discovery
from console.fabric.models import ChangeRequest, ChangeStep, DiscoveryRun, Fabric, FabricPartition, PortAdminState
from console.telemetry.models import FabricEvent
from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.models import Membership, Principal, Role, Tenant
from designer import services as designer_services
from scheduling.models import Node, Pool, Quota, Reservation
from scheduling.services import quotas, reservations
from tests.scheduling.conftest import give_quota, make_fabric, make_pool, request_for

pytestmark = pytest.mark.django_db

SMALL, LARGE = 2, 6
SYSTEM = Actor.system("tests")
OPERATOR = Principal(None, Role.OPERATOR, None)
User = get_user_model()


@dataclass
class World:
    """Rows of every listed kind, grown in step: ``grow(n)`` makes it n of each."""

    operator: object
    fabric: Fabric
    nodes: list[Node]
    size: int = 0
    tenants: list[Tenant] = field(default_factory=list)
    pools: list[Pool] = field(default_factory=list)
    admins: list[object] = field(default_factory=list)
    counter: itertools.count = field(default_factory=itertools.count)

    def grow(self, n: int) -> None:
        while self.size < n:
            i = self.size
            self.size += 1
            tenant = Tenant.objects.create(name=f"Tenant {i}", slug=f"tenant-{i}")
            self.tenants.append(tenant)
            user = User.objects.create_user(f"admin-{i}")  # no password to hash: the tests force_login
            Membership.objects.create(user=user, role=Role.TENANT_ADMIN, tenant=tenant)
            self.admins.append(user)
            self.pools.append(make_pool(self.fabric, f"pool-{i}", self.nodes[2 * i : 2 * i + 2]))
            for pool in self.pools:  # every tenant holds a quota in every pool: pools × tenants rows
                for t in self.tenants:
                    if not Quota.objects.filter(tenant=t, pool=pool).exists():
                        give_quota(t, pool, 1, 15)
            placed = reservations.reserve(
                SYSTEM, Principal(None, Role.TENANT_ADMIN, tenant.pk), request_for(self.pools[i], gpus=8, name=f"r{i}")
            )
            assert placed.status != Reservation.Status.REJECTED, placed.reason
            actions.issue_token(
                Actor.for_user(self.operator), Principal.of(self.operator), user=self.operator, name=f"token-{i}"
            )
            designer_services.create_design(
                SYSTEM, OPERATOR, name=f"design-{i}", options={"topology": "fat-tree", "nodes": 4}
            )
            other = Fabric.objects.create(name=f"fabric-{i}", revision=self.fabric.revision)
            DiscoveryRun.objects.create(fabric=other, compare={"ok": True})
            DiscoveryRun.objects.create(fabric=other, compare={"ok": False})
            FabricPartition.objects.create(fabric=self.fabric, name=f"manual-{i}", pkey=0x100 + i)
            PortAdminState.objects.create(fabric=self.fabric, switch="leaf-01", port=20 + i, reason="test")
            change = ChangeRequest.objects.create(fabric=self.fabric, status=ChangeRequest.Status.APPLIED)
            for seq, name in enumerate(("render", "lint", "swap"), start=1):
                ChangeStep.objects.create(change=change, seq=seq, name=name, status="ok")
            event = FabricEvent.objects.create(
                fabric=self.fabric,
                kind=FabricEvent.Kind.LINK_DOWN,
                subject=f"link-{i}",
                message="down",
                reservations=[placed.pk],
                opened_at=timezone.now() - dt.timedelta(minutes=i),
            )
            event.tenants.set([tenant])
            self._webhooks(tenant)

    def _webhooks(self, tenant: Tenant) -> None:
        """A webhook of the new tenant, and a logged test delivery to it and to tenant 0's."""
        from console.notify import services as notify
        from console.notify.models import DeliveryAttempt, Webhook

        admin = Principal(None, Role.TENANT_ADMIN, tenant.pk)
        notify.create_webhook(
            SYSTEM, admin, tenant=tenant, name="hook", url="https://1.1.1.1/hook", events=["webhook.test"]
        )
        for hook in Webhook.objects.filter(tenant__in=[tenant, self.tenants[0]]).select_related("tenant"):
            delivery = notify.send_test(SYSTEM, Principal(None, Role.TENANT_ADMIN, hook.tenant_id), hook)
            for number in (1, 2):
                DeliveryAttempt.objects.create(
                    delivery=delivery, number=number, started_at=timezone.now(), duration_ms=3, http_status=500
                )


@pytest.fixture
def world(operator) -> World:
    fabric = make_fabric("qc16", {"topology": "fat-tree", "nodes": 16, "node_type": "DGX-H100"})
    return World(operator=operator, fabric=fabric, nodes=list(Node.objects.filter(fabric=fabric).order_by("name")))


def _api(path: str) -> Callable[[World], str]:
    return lambda w: path.format(fabric=w.fabric.pk)


LISTS: dict[str, Callable[[World], str]] = {
    # REST list endpoints
    "api pools": _api("/api/pools/"),
    "api quotas": _api("/api/quotas/"),
    "api reservations": _api("/api/reservations/"),
    "api tenants": _api("/api/tenants/"),
    "api members": _api("/api/members/"),
    "api tokens": _api("/api/tokens/"),
    "api audit": _api("/api/audit/"),
    "api designs": _api("/api/designs/"),
    "api fabrics": _api("/api/fabrics/"),
    "api partitions": _api("/api/fabrics/{fabric}/partitions/"),
    "api ports": _api("/api/fabrics/{fabric}/ports/"),
    "api changes": _api("/api/fabrics/{fabric}/changes/"),
    "api events": _api("/api/telemetry/events/"),
    "api overview": _api("/api/overview/"),
    "api webhooks": _api("/api/webhooks/"),
    # pages
    "page reserve": lambda w: reverse("web:reservations"),
    "page all reservations": lambda w: reverse("web:reservations-all"),
    "page quotas": lambda w: reverse("web:reservation-quotas"),
    "page occupancy": lambda w: reverse("web:reservation-occupancy"),
    "page audit": lambda w: reverse("web:audit"),
    "page tenants": lambda w: reverse("web:tenants"),
    "page reservation list": lambda w: reverse("web:reservations-list"),
    "csv all reservations": lambda w: reverse("web:reservations-all") + "?_export=csv",
    "csv reservation list": lambda w: reverse("web:reservations-list") + "?_export=csv",
    "csv audit": lambda w: reverse("web:audit") + "?_export=csv",
    "csv tenants": lambda w: reverse("web:tenants") + "?_export=csv",
    "page tokens": lambda w: reverse("web:tokens"),
    "page fabrics": lambda w: reverse("web:fabrics"),
    "page changes": lambda w: reverse("web:fabric-changes", args=[w.fabric.pk]),
    "page events": lambda w: reverse("web:fabric-events", args=[w.fabric.pk]),
    "csv events": lambda w: reverse("web:fabric-events", args=[w.fabric.pk]) + "?_export=csv",
    "page ports": lambda w: reverse("web:fabric-ports", args=[w.fabric.pk]),
    "csv quotas": lambda w: reverse("web:reservation-quotas") + "?_export=csv",
    "page home": lambda w: reverse("web:home"),
    "page designer": lambda w: reverse("web:designer"),
    "page live": lambda w: reverse("web:live"),
    "page notifications": lambda w: reverse("web:notifications"),
}


def _get(client, url: str) -> None:
    api = url.startswith("/api/")
    response = client.get(url, HTTP_ACCEPT="application/json" if api else "text/html", follow=not api)
    assert response.status_code == 200, (url, response.content[:500])


@pytest.mark.parametrize("name", list(LISTS))
def test_operator_list_costs_do_not_grow_with_the_data(name, world, client, django_assert_max_num_queries):
    client.force_login(world.operator)
    url = LISTS[name](world)
    # given a small world, rendered once (caches warmed) and then counted
    world.grow(SMALL)
    _get(client, url)
    with CaptureQueriesContext(connection) as small:
        _get(client, url)
    # when it has three times as many rows of everything
    world.grow(LARGE)
    # then the same list costs no more queries
    with django_assert_max_num_queries(len(small.captured_queries)):
        _get(client, url)


#: What a tenant admin lists: its own rows, among other tenants' (which must not cost it either).
TENANT_LISTS = [
    "api pools",
    "api quotas",
    "api reservations",
    "api members",
    "api audit",
    "api events",
    "api overview",
    "page home",
    "page reserve",
    "page live",
    "page audit",
    "page reservation list",
    "csv reservation list",
    "csv audit",
    "api webhooks",
    "page notifications",
]


@pytest.mark.parametrize("name", TENANT_LISTS)
def test_tenant_list_costs_do_not_grow_with_the_data(name, world, client, django_assert_max_num_queries):
    url = LISTS[name](world)
    # given a small world where tenant 0's admin lists
    world.grow(SMALL)
    client.force_login(world.admins[0])
    _get(client, url)
    with CaptureQueriesContext(connection) as small:
        _get(client, url)
    # when every tenant (tenant 0 too) has more rows
    world.grow(LARGE)
    for i in range(SMALL, LARGE):
        event = FabricEvent.objects.create(
            fabric=world.fabric,
            kind=FabricEvent.Kind.LINK_DOWN,
            subject=f"tenant-0-link-{i}",
            message="down",
            reservations=list(Reservation.objects.filter(tenant=world.tenants[0]).values_list("pk", flat=True)),
            opened_at=timezone.now(),
        )
        event.tenants.set([world.tenants[0]])
    # then tenant 0's lists cost no more queries
    with django_assert_max_num_queries(len(small.captured_queries)):
        _get(client, url)


def test_the_batched_reads_answer_what_the_per_row_reads_do(world):
    world.grow(SMALL + 1)
    # the newest discovery of every fabric (none for a fabric never discovered)
    fabrics = list(Fabric.objects.all())
    assert discovery.latest_runs(fabrics) == {
        f.pk: run for f in fabrics if (run := discovery.latest_run(f)) is not None
    }
    assert {run.compare["ok"] for run in discovery.latest_runs(fabrics).values()} == {False}
    # the usage of every quota: what usage() sweeps for each, one quota at a time
    now = timezone.now()
    batched = quotas.quota_usages(Quota.objects.all(), now=now)
    for quota in Quota.objects.all():
        second = now + dt.timedelta(seconds=1)
        assert batched[quota.pk]["used_gpus"] == quotas.usage(quota.tenant_id, quota.pool_id, now, second)
        assert batched[quota.pk]["borrowed_gpus"] == quotas.usage(
            quota.tenant_id, quota.pool_id, now, second, borrowed_only=True
        )
        assert batched[quota.pk]["peak_future_gpus"] == quotas.usage(quota.tenant_id, quota.pool_id, now)
    assert sum(u["used_gpus"] for u in batched.values()) == 8 * (SMALL + 1)
