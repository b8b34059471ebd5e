"""WebSockets: authenticated by session or token, Origin checked, closed on token revocation."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from console.asgi import application
from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.models import Principal

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
HOST = (b"host", b"127.0.0.1:8000")
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def _issue(user):
    return actions.issue_token(Actor.for_user(user), Principal.of(user), user=user, name="ws")


def _revoke(user, token):
    return actions.revoke_token(Actor.for_user(user), Principal.of(user), token)


async def _connect(subprotocols=None, headers=(ORIGIN,)):
    communicator = WebsocketCommunicator(
        application, "/ws/notifications/", headers=[HOST, *headers], subprotocols=subprotocols
    )
    connected, code = await communicator.connect(timeout=5)
    return communicator, connected, code


@pytest.mark.smoke
async def test_token_socket_closes_when_token_revoked(member_a):
    token, plaintext = await sync_to_async(_issue)(member_a)
    communicator, connected, _ = await _connect([f"bearer.{plaintext}"])
    assert connected
    hello = await communicator.receive_json_from(timeout=5)
    assert hello["type"] == "hello" and hello["user"] == "member-a"

    await sync_to_async(_revoke)(member_a, token)
    assert (await communicator.receive_json_from(timeout=5))["type"] == "access.revoked"
    closed = await communicator.receive_output(timeout=5)
    assert closed["type"] == "websocket.close" and closed["code"] == 4403


async def test_anonymous_socket_is_refused(db):
    communicator, connected, code = await _connect()
    assert not connected and code == 4401


async def test_foreign_origin_is_refused(member_a):
    _, plaintext = await sync_to_async(_issue)(member_a)
    communicator, connected, _ = await _connect([f"bearer.{plaintext}"], headers=[(b"origin", b"http://evil.example")])
    assert not connected


async def test_malformed_and_oversized_frames_get_errors_not_crashes(member_a):
    _, plaintext = await sync_to_async(_issue)(member_a)
    communicator, connected, _ = await _connect([f"bearer.{plaintext}"])
    assert connected
    await communicator.receive_json_from(timeout=5)
    await communicator.send_to(text_data="{not json")
    assert (await communicator.receive_json_from(timeout=5))["code"] == "malformed"
    await communicator.send_to(text_data="x" * 10_000)
    assert (await communicator.receive_json_from(timeout=5))["code"] == "frame_refused"
    await communicator.send_json_to({"type": "ping"})
    assert (await communicator.receive_json_from(timeout=5))["type"] == "pong"
    await communicator.disconnect()


def _membership(user):
    from console.tenancy.models import Membership

    return Membership.objects.get(user=user)


async def _open_token_socket(user):
    _, plaintext = await sync_to_async(_issue)(user)
    communicator, connected, _ = await _connect([f"bearer.{plaintext}"])
    assert connected
    assert (await communicator.receive_json_from(timeout=5))["type"] == "hello"
    return communicator


async def _assert_closed_revoked(communicator):
    assert (await communicator.receive_json_from(timeout=5))["type"] == "access.revoked"
    closed = await communicator.receive_output(timeout=5)
    assert closed["type"] == "websocket.close" and closed["code"] == 4403


async def test_removed_member_sockets_close(admin_a, member_a):
    communicator = await _open_token_socket(member_a)

    def remove():
        actions.remove_member(Actor.for_user(admin_a), Principal.of(admin_a), _membership(member_a))

    await sync_to_async(remove)()
    await _assert_closed_revoked(communicator)


async def test_role_change_closes_sockets_authorised_for_the_old_role(admin_a, member_a):
    from console.tenancy.models import Role

    communicator = await _open_token_socket(member_a)

    def promote():
        actor, principal = Actor.for_user(admin_a), Principal.of(admin_a)
        actions.update_member(actor, principal, _membership(member_a), role=Role.TENANT_ADMIN)

    await sync_to_async(promote)()
    await _assert_closed_revoked(communicator)


async def test_configured_origins_replace_the_consoles_own(member_a, settings):
    settings.CONSOLE_ALLOWED_ORIGINS = ["https://console.example.org"]
    _, plaintext = await sync_to_async(_issue)(member_a)
    bearer = [f"bearer.{plaintext}"]
    _, connected, _ = await _connect(bearer, headers=[(b"origin", b"https://console.example.org")])
    assert connected
    for other in (b"http://127.0.0.1:8000", b"http://console.example.org", b"https://console.example.org:8443"):
        _, connected, _ = await _connect(bearer, headers=[(b"origin", other)])
        assert not connected, other


async def test_own_origin_needs_an_allowed_host(member_a):
    """A DNS-rebound name is its own origin, but not one of ALLOWED_HOSTS."""
    _, plaintext = await sync_to_async(_issue)(member_a)
    communicator = WebsocketCommunicator(
        application,
        "/ws/notifications/",
        headers=[(b"host", b"rebound.example:8000"), (b"origin", b"http://rebound.example:8000")],
        subprotocols=[f"bearer.{plaintext}"],
    )
    connected, _ = await communicator.connect(timeout=5)
    assert not connected


async def test_an_unrouted_path_and_a_deeply_nested_frame_close_cleanly_with_a_code(member_a):
    # a path the console does not serve: taken and closed with 4404, not a 500 and a traceback
    lost = WebsocketCommunicator(application, "/ws/nowhere/", headers=[HOST, ORIGIN])
    connected, _ = await lost.connect(timeout=5)
    assert connected
    closed = await lost.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4404}
    # 3 KB of nesting: the parser's RecursionError is an error frame and close code 1007
    _, plaintext = await sync_to_async(_issue)(member_a)
    communicator, connected, _ = await _connect([f"bearer.{plaintext}"])
    assert connected
    await communicator.receive_json_from(timeout=5)
    await communicator.send_to(text_data="[" * 1500 + "]" * 1500)
    assert (await communicator.receive_json_from(timeout=5))["code"] == "too_deep"
    closed = await communicator.receive_output(timeout=5)
    assert closed["type"] == "websocket.close" and closed["code"] == 1007


async def test_the_agents_socket_answers_a_deeply_nested_frame_with_an_error():
    from console.live.agent_consumer import AgentConsumer

    # (the consumer's frame handling, before any hello: the JSON is refused, the socket stays)
    consumer = AgentConsumer()
    sent: list = []

    async def send_json(content, close=False):
        sent.append(content)

    consumer.send_json = send_json
    await consumer.receive(text_data="[" * 1500 + "]" * 1500)
    assert sent == [{"type": "error", "detail": "send JSON objects"}]
