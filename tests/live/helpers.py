"""Builders for live tests: a small designed fabric with two tenants' ready reservations."""

from __future__ import annotations

import datetime as dt

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from console.asgi import application
from console.fabric.models import Fabric
from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from scheduling.models import Node, Reservation
from scheduling.services import inventory, lifecycle, quotas
from scheduling.services.reservations import ReservationRequest, reserve

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
#: the Host a browser on http://127.0.0.1:8000 sends (the Origin must be the console's own)
HOST = (b"host", b"127.0.0.1:8000")
SYSTEM = Actor.system("tests")
OPERATOR = Principal(None, Role.OPERATOR, None)


def ready_reservation(fabric: Fabric, tenant, nodes: int = 2) -> Reservation:
    """Reserve ``nodes`` whole nodes for ``tenant`` through scheduling's services and mark the
    reservation ready the way the push pipeline does (fabric_verified with its P_Key)."""
    pool = fabric.pools.first()
    if pool is None:
        pool = inventory.create_pool(
            SYSTEM, OPERATOR, fabric=fabric, name="all", nodes=list(Node.objects.filter(fabric=fabric))
        )
    quotas.set_quota(SYSTEM, OPERATOR, tenant=tenant, pool=pool, guaranteed_gpus=64, borrow_limit_gpus=0)
    principal = Principal(None, Role.TENANT_ADMIN, tenant.pk)
    res = reserve(SYSTEM, principal, ReservationRequest(pool_id=pool.pk, nodes=nodes, duration=dt.timedelta(hours=2)))
    assert res.status == Reservation.Status.PROVISIONING, res.reason
    lifecycle.fabric_verified(fabric.pk, {res.pkey}, change_id=0)
    res.refresh_from_db()
    assert res.status == Reservation.Status.READY
    return res


def token_for(user) -> str:
    _, plaintext = actions.issue_token(Actor.for_user(user), Principal.of(user), user=user, name="ws")
    return plaintext


async def connect(path: str, user=None, *, origin=ORIGIN):
    subprotocols = None
    if user is not None:
        subprotocols = [f"bearer.{await sync_to_async(token_for)(user)}"]
    comm = WebsocketCommunicator(application, path, headers=[HOST, origin], subprotocols=subprotocols)
    connected, code = await comm.connect(timeout=5)
    return comm, connected, code


async def messages_until(comm, predicate, timeout: float = 5.0) -> list[dict]:
    """Receive JSON messages until one satisfies ``predicate`` (returns all received)."""
    import asyncio

    got = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        left = deadline - loop.time()
        if left <= 0:
            raise AssertionError(f"no matching message within {timeout}s; got {got}")
        msg = await comm.receive_json_from(timeout=left)
        got.append(msg)
        if predicate(msg):
            return got


def open_live_page(processes, browser, world, username: str = "op"):
    """The collector's first sweep (every link up) published and stored as the snapshot, uvicorn
    started, and ``username``'s live page of the world's fabric open, live and synced once."""
    from playwright.sync_api import expect

    from tests.live.fabric_fixtures import statuses
    from tests.servers import login, web

    collector, fabric = world["collector"], world["fabric"]
    everything = statuses(collector)
    collector._publish(everything, 1.0)
    collector._snapshot(everything, 1.0, 0.1)
    url = web(processes)
    page = login(browser, url, username)
    page.goto(f"{url}/fabrics/{fabric.pk}/live/")
    expect(page.get_by_test_id("live-conn")).to_have_text("live", timeout=15_000)
    page.wait_for_function("() => window.__live?.stream.resyncs === 1")
    return page, everything
