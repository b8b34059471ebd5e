"""Live sockets: one WebsocketCommunicator test per consumer, and tenant isolation — a tenant's
socket never receives another tenant's link or event; other tenants' groups are refused."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from console.fabric.models import ChangeRequest, ChangeStep
from console.live.schemas import check
from console.telemetry import services
from console.telemetry.alarms import Transition
from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.models import Principal
from tests.live.fabric_fixtures import statuses
from tests.live.helpers import connect, messages_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


async def _ready(comm) -> dict:
    hello = await comm.receive_json_from(timeout=5)
    assert hello["type"] == "hello"
    subscribed = await comm.receive_json_from(timeout=5)
    check(subscribed)
    return subscribed


async def test_operator_fabric_socket_gets_numbered_coalesced_deltas(world, operator):
    comm, connected, _ = await connect(f"/ws/live/fabric/{world['fabric'].pk}/", operator)
    assert connected
    base = (await _ready(comm))["seq"]
    collector = world["collector"]
    await sync_to_async(collector._publish)(statuses(collector, bucket=3), 1.0)
    delta = (await messages_until(comm, lambda m: m["type"] == "link.delta"))[-1]
    check(delta)
    assert delta["seq"] == base + 1
    assert len(delta["links"]) == len(collector.lm.ends)  # the first delta: every link
    # the same state again is coalesced away; one link changing colour is one small delta
    await sync_to_async(collector._publish)(statuses(collector, bucket=3), 2.0)
    changed = statuses(collector, bucket=3)
    one = next(iter(changed))
    changed[one].bucket = 5
    await sync_to_async(collector._publish)(changed, 3.0)
    delta = (await messages_until(comm, lambda m: m["type"] == "link.delta"))[-1]
    assert delta["seq"] == base + 2 and [lk["id"] for lk in delta["links"]] == [one]
    await comm.disconnect()


async def test_tenant_socket_never_sees_other_tenants_links_or_events(world, admin_a, admin_b):
    comm_a, ok_a, _ = await connect(f"/ws/live/tenant/{world['a'].pk}/", admin_a)
    comm_b, ok_b, _ = await connect(f"/ws/live/tenant/{world['b'].pk}/", admin_b)
    assert ok_a and ok_b
    await _ready(comm_a)
    await _ready(comm_b)
    collector = world["collector"]
    links_a, links_b = collector.workload.tenant_links[world["a"].pk], collector.workload.tenant_links[world["b"].pk]
    assert links_a and links_b and not links_a & links_b
    link_b = sorted(links_b)[0]
    await sync_to_async(collector._publish)(statuses(collector, down={link_b}), 1.0)
    got_a = await messages_until(comm_a, lambda m: m["type"] == "link.delta")
    got_b = await messages_until(comm_b, lambda m: m["type"] == "link.delta")
    assert {lk["id"] for lk in got_a[-1]["links"]} == links_a
    assert {lk["id"] for lk in got_b[-1]["links"]} == links_b
    # an event on B's link reaches B (naming only B's reservation), never A
    await sync_to_async(services.apply_transitions)(
        world["fabric"].pk,
        [Transition("open", "link_down", link_b, "critical", f"link {link_b} is down")],
        collector.workload.link_owners,
        actor=Actor.system("test"),
    )
    event = (await messages_until(comm_b, lambda m: m["type"] == "event"))[-1]
    check(event)
    assert event["event"]["subject"] == link_b
    assert event["event"]["reservations"] == [world["res_b"].pk]
    assert await comm_a.receive_nothing(timeout=0.5)
    await comm_a.disconnect()
    await comm_b.disconnect()


async def test_other_tenants_group_and_the_fabric_group_are_refused_to_a_tenant(world, admin_a):
    comm, connected, _ = await connect(f"/ws/live/tenant/{world['b'].pk}/", admin_a)
    assert connected  # accepted to say why, then closed
    await comm.receive_json_from(timeout=5)  # hello
    refused = await comm.receive_json_from(timeout=5)
    assert refused["type"] == "error" and refused["code"] == "not_found"
    closed = await comm.receive_output(timeout=5)
    assert closed["type"] == "websocket.close" and closed["code"] == 4403
    comm, _, _ = await connect(f"/ws/live/fabric/{world['fabric'].pk}/", admin_a)
    await comm.receive_json_from(timeout=5)
    assert (await comm.receive_json_from(timeout=5))["code"] == "not_found"


async def test_live_sockets_need_auth_and_a_known_origin(world, operator):
    path = f"/ws/live/fabric/{world['fabric'].pk}/"
    _, connected, code = await connect(path)
    assert not connected and code == 4401
    _, connected, _ = await connect(path, operator, origin=(b"origin", b"http://evil.example"))
    assert not connected


async def test_revoking_the_token_closes_the_live_socket(world, admin_a):
    token, plaintext = await sync_to_async(actions.issue_token)(
        Actor.for_user(admin_a), await sync_to_async(Principal.of)(admin_a), user=admin_a, name="t"
    )
    from channels.testing import WebsocketCommunicator

    from console.asgi import application
    from tests.live.helpers import HOST, ORIGIN

    comm = WebsocketCommunicator(
        application, f"/ws/live/tenant/{world['a'].pk}/", headers=[HOST, ORIGIN], subprotocols=[f"bearer.{plaintext}"]
    )
    assert (await comm.connect(timeout=5))[0]
    await _ready(comm)
    await sync_to_async(actions.revoke_token)(
        Actor.for_user(admin_a), await sync_to_async(Principal.of)(admin_a), token
    )
    got = await messages_until(comm, lambda m: m["type"] == "access.revoked")
    assert got[-1]["type"] == "access.revoked"
    closed = await comm.receive_output(timeout=5)
    assert closed["type"] == "websocket.close" and closed["code"] == 4403


def _change(fabric):
    change = ChangeRequest.objects.create(fabric=fabric, status="applying")
    ChangeStep.objects.create(change=change, seq=1, name="render", status="ok")
    ChangeStep.objects.create(change=change, seq=2, name="swap", status="running")
    return change


async def test_change_socket_streams_push_progress_to_operators_only(world, operator, admin_a):
    change = await sync_to_async(_change)(world["fabric"])
    comm, connected, _ = await connect(f"/ws/live/change/{change.pk}/", operator)
    assert connected
    await _ready(comm)
    progress = await comm.receive_json_from(timeout=5)
    check(progress)
    assert [s["name"] for s in progress["steps"]] == ["render", "swap"]
    assert progress["status"] == "applying"
    # a step finishing is streamed by the collector's watcher, numbered in the change's group
    await sync_to_async(ChangeStep.objects.filter(change=change, seq=2).update)(status="ok")
    await sync_to_async(world["collector"].publisher.change_progress)()
    update = (await messages_until(comm, lambda m: m["type"] == "change.progress"))[-1]
    check(update)
    assert [s["status"] for s in update["steps"]] == ["ok", "ok"] and update["seq"] >= 1
    comm_t, _, _ = await connect(f"/ws/live/change/{change.pk}/", admin_a)
    await comm_t.receive_json_from(timeout=5)
    assert (await comm_t.receive_json_from(timeout=5))["code"] == "not_found"


async def test_a_live_message_goes_out_without_a_hop_through_the_database_thread(world, operator, monkeypatch):
    """channels runs Django's close_old_connections in its one thread-sensitive executor thread
    before every message a consumer handles; a live delta (prepared text, no database) must not
    queue behind that hop once per socket."""
    import channels.consumer

    hops = []
    real = channels.consumer.aclose_old_connections

    async def counted():
        hops.append(1)
        await real()

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    comm, connected, _ = await connect(f"/ws/live/fabric/{world['fabric'].pk}/", operator)
    assert connected
    await _ready(comm)
    before = len(hops)
    assert before >= 1  # the connect went through channels' dispatch (and the counter)
    collector = world["collector"]
    for bucket in (1, 4):
        await sync_to_async(collector._publish)(statuses(collector, bucket=bucket), 1.0 + bucket)
        delta = (await messages_until(comm, lambda m: m["type"] == "link.delta"))[-1]
        check(delta)
    assert len(hops) == before
    await comm.send_json_to({"type": "ping"})  # a frame from the client still takes the usual path
    assert (await comm.receive_json_from(timeout=5))["type"] == "pong"
    assert len(hops) == before + 1
    await comm.disconnect()
