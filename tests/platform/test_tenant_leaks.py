"""The leak scan (tests/isolation.py): nothing tenant A is shown names tenant B's hosts,
reservations, users or the tenant itself — no page, no API response, no live message.

Tenant B is built with distinctive names; its hosts are the design's names of the nodes its ready
reservation holds (matched as whole words). Every URL pattern of the project is requested as A
with each parameter filled from the world's ids and names (A's, B's and the shared fabric's), and
A's live sockets are scanned while the collector publishes, snapshots and opens events.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from console.fabric.models import ChangeRequest, DiscoveryJob
from console.telemetry import services
from console.telemetry.alarms import Transition
from console.telemetry.models import FabricEvent, ValidationRun
from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.models import ApiToken, AuditEntry, Membership, Principal, Role, Tenant
from scheduling.models import HCA, Quota, Reservation
from tests.isolation import SCAN_PARAMETERS, fill_route, leaked, url_routes
from tests.live.fabric_fixtures import statuses, world  # noqa: F401
from tests.live.helpers import connect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

OTHER_NAME, OTHER_SLUG = "Quokka Holdings", "quokka-holdings"
OTHER_USERS = ("quokka-admin", "quokka-member")
OTHER_RESERVATION = "quokka-secret-run"
OWN_RESERVATION = "wombat-own-run"


@pytest.fixture
def tenant_b(db) -> Tenant:
    """The other tenant, with names nothing else in the world contains."""
    return Tenant.objects.create(name=OTHER_NAME, slug=OTHER_SLUG)


@pytest.fixture
def scan(world, make_user, admin_a, tenant_a, tenant_b):  # noqa: F811
    """The world, B's users, names, token and events, and what to fill route parameters with."""
    quokka_admin = make_user(OTHER_USERS[0], Role.TENANT_ADMIN, tenant_b)
    make_user(OTHER_USERS[1], Role.TENANT_MEMBER, tenant_b)
    res_a, res_b = world["res_a"], world["res_b"]
    Reservation.objects.filter(pk=res_b.pk).update(name=OTHER_RESERVATION, created_by=quokka_admin)
    Reservation.objects.filter(pk=res_a.pk).update(name=OWN_RESERVATION, created_by=admin_a)
    token_b, _ = actions.issue_token(
        Actor.for_user(quokka_admin), Principal.of(quokka_admin), user=quokka_admin, name="quokka-token"
    )
    token_a, _ = actions.issue_token(Actor.for_user(admin_a), Principal.of(admin_a), user=admin_a, name="own-token")
    collector = world["collector"]
    links_b = sorted(collector.workload.tenant_links[tenant_b.pk])
    links_a = sorted(collector.workload.tenant_links[tenant_a.pk])
    collector._publish(statuses(collector, down={links_b[0]}), 1.0)
    collector._snapshot(statuses(collector, down={links_b[0]}), 1.0, 0.5)
    services.apply_transitions(
        world["fabric"].pk,
        [
            Transition("open", "link_down", links_b[0], "critical", f"link {links_b[0]} is down"),
            Transition("open", "sm_state", "sm", "critical", "subnet manager state MASTER → STANDBY"),
        ],
        {**collector.workload.link_owners, "sm": [(res_a.pk, tenant_a.pk), (res_b.pk, tenant_b.pk)]},
        actor=Actor.system("test"),
    )
    hosts_b = set(res_b.allocations.values_list("node__name", flat=True))
    hosts_a = set(res_a.allocations.values_list("node__name", flat=True))
    assert hosts_b and not hosts_a & hosts_b
    secrets = {OTHER_NAME, OTHER_SLUG, *OTHER_USERS, OTHER_RESERVATION, "quokka-token", *hosts_b}
    fabric = world["fabric"]
    graph_leaves = sorted({link.split("/")[0] for link in links_a + links_b})
    ids = {
        res_a.pk,
        res_b.pk,
        tenant_a.pk,
        tenant_b.pk,
        token_a.pk,
        token_b.pk,
        fabric.pk,
        fabric.revision.design_id,
        *Membership.objects.values_list("pk", flat=True),
        *Quota.objects.values_list("pk", flat=True),
        *fabric.pools.values_list("pk", flat=True),
        *ChangeRequest.objects.values_list("pk", flat=True),
        *res_b.allocations.values_list("node_id", flat=True)[:1],
        *AuditEntry.objects.order_by("-pk").values_list("pk", flat=True)[:5],
        *FabricEvent.objects.filter(fabric=fabric).values_list("pk", flat=True),
    }
    params: dict[str, list[str]] = {
        "pk": sorted(str(i) for i in ids),
        "fabric_id": [str(fabric.pk)],
        "fabric_pk": [str(fabric.pk)],
        "design_id": [str(fabric.revision.design_id)],
        "revision": [str(fabric.revision.number)],
        "number": [str(fabric.revision.number)],
        "other": [str(fabric.revision.number)],
        "fmt": ["ibnetdiscover", "topo", "json", "csv"],
        "change_id": [str(i) for i in ChangeRequest.objects.values_list("pk", flat=True)] or ["1"],
        "switch": graph_leaves,
        "link_id": links_a[:2] + links_b[:2],
        # node power and BMC: one of B's hosts (tenants are refused node power altogether)
        "node_id": [str(i) for i in res_b.allocations.values_list("node_id", flat=True)[:1]],
        # /ufmRest/: both reservations' P_Keys, a port GUID of one of B's hosts, an unserved path
        "fabric": [fabric.name],
        "pkey": [f"{res_a.pkey:#x}", f"{res_b.pkey:#x}"],
        "guids": [g[2:] for g in HCA.objects.filter(node__name__in=hosts_b).values_list("port_guid", flat=True)[:1]],
        "rest": ["resources/links"],
        # an agent of the fabric (none in this world: the revoke route answers the same for all)
        "agent_pk": ["1"],
        # a discovery job of the fabric (finished: a compare does not wait for it)
        "job_id": [str(DiscoveryJob.objects.create(fabric=fabric, state=DiscoveryJob.State.DONE).pk)],
        "run_id": [str(ValidationRun.objects.create(fabric=fabric, state=ValidationRun.State.DONE).pk)],
    }
    queries: dict[str, list[str]] = {
        "fabric-live": ["", "?level=fabric", "?level=pod"] + [f"?switch={leaf}" for leaf in graph_leaves],
        "designer-design": ["", "?level=pod"],
        "designer-revision": ["", "?level=pod"],
    }
    assert set(params) == SCAN_PARAMETERS
    return {"world": world, "secrets": secrets, "params": params, "queries": queries, "user": admin_a}


def _requests(scan: dict[str, Any]) -> list[str]:
    urls = []
    for route, name in url_routes():
        if name in {"logout", "token-revoke", "docs", "schema"}:
            continue  # a mutation (logout ends the session the scan runs in) or the static API schema
        for url in fill_route(route, scan["params"]):
            for query in scan["queries"].get(name, ["?page_size=1000" if name.endswith("-list") else ""]):
                urls.append(url + query)
    return urls


def _with_exports(urls):
    """Each URL as a page and as JSON, and each page's CSV export (``?_export=csv``): a table's
    export holds what its page lists, so it must name nothing of B either."""
    for url in urls:
        yield url, "text/html"
        yield url, "application/json"
        if not url.startswith("/api/"):
            yield f"{url}{'&' if '?' in url else '?'}_export=csv", "text/html"


@pytest.mark.parametrize("role", ["admin", "member"])
def test_no_response_a_tenant_gets_names_another_tenants_things(scan, role, member_a):
    client = Client()
    client.force_login(scan["user"] if role == "admin" else member_a)
    found = []
    requested = 0
    for url, accept in _with_exports(_requests(scan)):
        response = client.get(url, HTTP_ACCEPT=accept)
        requested += 1
        body = b"".join(response.streaming_content) if response.streaming else response.content
        names = leaked(body.decode("utf-8", "replace"), scan["secrets"], asked=url)
        if names:
            found.append(f"{url} ({accept}) → {response.status_code}: {', '.join(names)}")
    # what A's own requests answer: placements, refusals, conflicts (each may explain itself)
    pool = scan["world"]["fabric"].pools.first().pk
    own = scan["world"]["res_a"].pk
    probes = [
        ("/api/reservations/preview/", {"pool": pool, "nodes": 2, "duration_minutes": 60}),
        ("/api/reservations/preview/", {"pool": pool, "nodes": 64, "duration_minutes": 60}),
        ("/api/reservations/", {"pool": pool, "nodes": 64, "duration_minutes": 60, "name": "too-big"}),
        ("/api/reservations/", {"pool": pool, "nodes": 2, "duration_minutes": 60, "name": "fits"}),
        (f"/api/reservations/{own}/extend/", {"end": "2099-01-01T00:00:00Z"}),
    ]
    for url, body in probes:
        response = client.post(url, body, content_type="application/json", HTTP_ACCEPT="application/json")
        requested += 1
        assert response.status_code < 500, (url, response.content[:300])
        names = leaked(response.content.decode("utf-8", "replace"), scan["secrets"], asked=url)
        if names:
            found.append(f"POST {url} → {response.status_code}: {', '.join(names)}")
    assert requested > 300  # the crawl reached the project's routes
    assert not found, "tenant A was shown tenant B's names:\n" + "\n".join(found)


@pytest.mark.asyncio
async def test_no_live_message_a_tenant_gets_names_another_tenants_things(world, admin_a, tenant_a, tenant_b):  # noqa: F811
    await sync_to_async(Reservation.objects.filter(pk=world["res_b"].pk).update)(name=OTHER_RESERVATION)
    hosts_b = await sync_to_async(lambda: set(world["res_b"].allocations.values_list("node__name", flat=True)))()
    secrets = {OTHER_NAME, OTHER_SLUG, OTHER_RESERVATION, *hosts_b}
    sockets = []
    for path in (f"/ws/live/tenant/{tenant_a.pk}/", "/ws/notifications/"):
        comm, connected, _ = await connect(path, admin_a)
        assert connected
        sockets.append(comm)
    collector = world["collector"]
    links_b = sorted(collector.workload.tenant_links[tenant_b.pk])
    await sync_to_async(collector._publish)(statuses(collector, down={links_b[0]}), 1.0)
    await sync_to_async(collector._snapshot)(statuses(collector), 1.0, 0.5)
    owners = {
        **collector.workload.link_owners,
        "sm": [(world["res_a"].pk, tenant_a.pk), (world["res_b"].pk, tenant_b.pk)],
    }
    await sync_to_async(services.apply_transitions)(
        world["fabric"].pk,
        [
            Transition("open", "link_down", links_b[0], "critical", f"link {links_b[0]} is down"),
            Transition("open", "sm_state", "sm", "critical", "subnet manager state MASTER → STANDBY"),
        ],
        owners,
        actor=Actor.system("test"),
    )
    received = []
    for comm in sockets:
        while not await comm.receive_nothing(timeout=1):
            received.append(await comm.receive_from(timeout=5))
        await comm.disconnect()
    kinds = {json.loads(m)["type"] for m in received}
    assert {"hello", "subscribed", "link.delta", "event"} <= kinds  # the scan saw live traffic
    found = [m for m in received if leaked(m, secrets)]
    assert not found, found
    # and the token that opened them is not B's
    assert not await sync_to_async(ApiToken.objects.filter(user__username__in=OTHER_USERS).exists)()


def test_live_canvas_names_the_tenants_own_hosts_and_operators_see_all(scan, operator):
    live = scan["world"]
    url = f"/fabrics/{live['fabric'].pk}/live/?level=pod"
    hosts_a = set(live["res_a"].allocations.values_list("node__name", flat=True))
    hosts_b = set(live["res_b"].allocations.values_list("node__name", flat=True))
    tenant, op = Client(), Client()
    tenant.force_login(scan["user"])
    op.force_login(operator)
    page = tenant.get(url).content.decode()
    assert leaked(page, hosts_a) == sorted(hosts_a)  # its own hosts' links stay on the canvas
    assert leaked(page, hosts_b) == []
    assert leaked(op.get(url).content.decode(), hosts_b) == sorted(hosts_b)
