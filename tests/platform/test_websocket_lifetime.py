"""WebSockets against a real server (uvicorn, channels-redis, PostgreSQL): the Origin must be the
console's own (scheme, host and port), and a socket ends with the session or token that opened
it: at logout, and at the moment the session or token expires."""

from __future__ import annotations

import datetime as dt
import json
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.models import ApiToken, Principal
from tests.fabric.lab_fixtures import lab_data_dir  # noqa: F401
from tests.needs import needs
from tests.servers import processes, web  # noqa: F401

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
    needs("postgresql"),
]

CSRF = "a" * 32  # any well-formed token: the cookie and the header only have to agree


@pytest.fixture
def server(processes):  # noqa: F811
    url = web(processes)
    return url, "ws" + url.removeprefix("http")


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


@contextmanager
def socket(ws_url: str, *, origin: str | None, cookie: str = "", token: str = "") -> Iterator[ClientConnection]:
    headers = {"Cookie": f"sessionid={cookie}"} if cookie else {}
    protocols = [f"bearer.{token}"] if token else None
    with connect(
        f"{ws_url}/ws/notifications/",
        origin=origin,  # type: ignore[arg-type]
        additional_headers=headers,
        subprotocols=protocols,  # type: ignore[arg-type]
        open_timeout=10,
    ) as ws:
        yield ws


def refused(ws_url: str, **kwargs) -> int:
    """The handshake's HTTP status of a socket the server must refuse."""
    with pytest.raises(InvalidStatus) as refusal, socket(ws_url, **kwargs):
        pass
    return refusal.value.response.status_code


def hello(ws: ClientConnection) -> dict:
    message = json.loads(ws.recv(timeout=10))
    assert message["type"] == "hello"
    return message


def closed_at(ws: ClientConnection, deadline_s: float) -> tuple[float, int, list[str]]:
    """Read until the server closes; (wall-clock time of the close, close code, message types seen)."""
    seen = []
    end = time.monotonic() + deadline_s
    try:
        while time.monotonic() < end:
            seen.append(json.loads(ws.recv(timeout=max(end - time.monotonic(), 0.01)))["type"])
    except ConnectionClosed:
        assert ws.close_code is not None
        return time.time(), ws.close_code, seen
    except TimeoutError:
        pass
    raise AssertionError(f"socket still open after {deadline_s} s (saw {seen})")


def assert_closed_at_expiry(at: float, expires: dt.datetime) -> None:
    """Closed once the expiry had passed (the server and the test share a clock), and within
    2 s of it (a busy machine's slack; the next connect or an hourly sweep would be far later)."""
    late = at - expires.timestamp()
    assert 0.0 <= late <= 2.0, late


def test_origin_must_be_the_consoles_own_scheme_host_and_port(server, member_a):
    url, ws_url = server
    cookie = session_cookie(member_a)
    port = url.rsplit(":", 1)[1]
    # a logged-in user's cookie, from the console's own page: accepted
    with socket(ws_url, origin=url, cookie=cookie) as ws:
        assert hello(ws)["user"] == "member-a"
    # the same cookie from another web app on the same machine: another port, scheme or host name
    for other in ("http://localhost:9999", "http://127.0.0.1:9999", f"https://127.0.0.1:{port}", "http://evil.example"):
        assert refused(ws_url, origin=other, cookie=cookie) == 403, other
    # a page with no origin ("null") or none at all
    assert refused(ws_url, origin="null", cookie=cookie) == 403
    assert refused(ws_url, origin=None, cookie=cookie) == 403


def test_logout_closes_that_sessions_sockets_only(server, member_a):
    url, ws_url = server
    leaving, staying = session_cookie(member_a), session_cookie(member_a)
    with (
        socket(ws_url, origin=url, cookie=leaving) as ws_leaving,
        socket(ws_url, origin=url, cookie=staying) as ws_staying,
    ):
        hello(ws_leaving)
        hello(ws_staying)
        request = urllib.request.Request(
            f"{url}/logout/",
            method="POST",
            data=b"",
            headers={"Cookie": f"sessionid={leaving}; csrftoken={CSRF}", "X-CSRFToken": CSRF},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        assert not Session.objects.filter(session_key=leaving).exists()

        _, code, seen = closed_at(ws_leaving, 5)
        assert code == 4401 and seen == ["access.ended"]
        # the user's other browser session is still live
        ws_staying.send('{"type": "ping"}')
        assert json.loads(ws_staying.recv(timeout=5))["type"] == "pong"


def test_session_socket_closes_when_the_session_expires(server, member_a):
    url, ws_url = server
    cookie = session_cookie(member_a)
    expires = timezone.now() + dt.timedelta(seconds=3)
    Session.objects.filter(session_key=cookie).update(expire_date=expires)
    with socket(ws_url, origin=url, cookie=cookie) as ws:
        hello(ws)
        at, code, seen = closed_at(ws, 10)
    assert code == 4401 and seen == ["access.expired"]
    # at the expiry (a sweep or the next connect would be much later), not before it
    assert_closed_at_expiry(at, expires)
    # and a new socket with the expired session is refused at connect
    assert refused(ws_url, origin=url, cookie=cookie) == 403


def test_extended_session_keeps_its_socket(server, member_a):
    url, ws_url = server
    cookie = session_cookie(member_a)
    Session.objects.filter(session_key=cookie).update(expire_date=timezone.now() + dt.timedelta(seconds=2))
    with socket(ws_url, origin=url, cookie=cookie) as ws:
        hello(ws)
        # the user was active meanwhile: the session now lasts longer (as SESSION_SAVE_EVERY_REQUEST does)
        Session.objects.filter(session_key=cookie).update(expire_date=timezone.now() + dt.timedelta(hours=1))
        with pytest.raises(TimeoutError):  # nothing arrives past the first expiry: no close
            ws.recv(timeout=3)
        ws.send('{"type": "ping"}')
        assert json.loads(ws.recv(timeout=5))["type"] == "pong"


def test_token_socket_closes_when_the_token_expires(server, member_a):
    url, ws_url = server
    token, plaintext = actions.issue_token(Actor.for_user(member_a), Principal.of(member_a), user=member_a, name="ws")
    expires = timezone.now() + dt.timedelta(seconds=3)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=expires)
    with socket(ws_url, origin=url, token=plaintext) as ws:
        hello(ws)
        at, code, seen = closed_at(ws, 10)
    assert code == 4401 and seen == ["access.expired"]
    assert_closed_at_expiry(at, expires)


def test_a_password_change_closes_the_other_sessions_sockets_and_keeps_tokens(server, member_a):
    """Decided and documented (docs/api.md): a password change signs the user's other browser
    sessions out and closes their sockets at once; the browser that changed it stays; API tokens
    are separate credentials and stay (as at logout)."""
    url, ws_url = server
    changing, other = session_cookie(member_a), session_cookie(member_a)
    _, token = actions.issue_token(Actor.for_user(member_a), Principal.of(member_a), user=member_a, name="ci")
    with (
        socket(ws_url, origin=url, cookie=changing) as ws_changing,
        socket(ws_url, origin=url, cookie=other) as ws_other,
        socket(ws_url, origin=url, token=token) as ws_token,
    ):
        for ws in (ws_changing, ws_other, ws_token):
            hello(ws)
        import requests

        new = "a-new-long-passphrase-42"
        response = requests.post(
            f"{url}/account/password/",
            data={"old_password": "pw-12345678", "new_password1": new, "new_password2": new},
            headers={"Cookie": f"sessionid={changing}; csrftoken={CSRF}", "X-CSRFToken": CSRF, "Origin": url},
            allow_redirects=False,
            timeout=10,
        )
        assert response.status_code == 302 and response.headers["Location"] == "/", response.text[:500]
        _, code, seen = closed_at(ws_other, 5)
        assert code == 4401 and seen == ["access.ended"]
        for ws in (ws_changing, ws_token):
            ws.send('{"type": "ping"}')
            assert json.loads(ws.recv(timeout=5))["type"] == "pong"
    assert ApiToken.objects.get(user=member_a).revoked_at is None
