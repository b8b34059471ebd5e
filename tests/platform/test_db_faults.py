"""Database connections under the real servers, on PostgreSQL.

- gunicorn (REST in production) keeps its connection between requests. Killed while idle (a
  PostgreSQL restart, a failover, an idle-session killer), it is replaced before the next request
  uses it: health-checked on reuse.
- Killed in the middle of a reservation's transaction, after its rows and before its audit row:
  the client is told 503 with Retry-After (not a bare 500), nothing of it is left in the database,
  and the retry books it once, with one audit row.
- uvicorn (ASGI) keeps none: every request runs in a thread of its own there, and connections
  kept for reuse were only left open.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from django.db import connection
from django.utils import timezone

from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.models import AuditEntry, Principal, Role, Tenant
from scheduling.models import Node, Reservation, ReservationAllocation
from tests.fabric.lab_fixtures import lab_data_dir  # noqa: F401
from tests.needs import needs
from tests.scheduling.conftest import give_quota, make_fabric, make_pool
from tests.servers import SERVER_APPLICATION_NAME, processes, web, wsgi  # noqa: F401

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(180),
    needs("postgresql"),
]


def call(url: str, token: str, method: str = "GET", body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, dict(resp.headers), _body(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), _body(err.read())


def _body(raw: bytes):
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return raw[:300].decode(errors="replace")  # not JSON: what the server said instead


def kill_backends(wait_event: str | None = None) -> int:
    """Terminate the server's sessions on the test database (those waiting on ``wait_event``)."""
    with connection.cursor() as cur:
        cur.execute(
            """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                       WHERE datname = current_database() AND application_name = %s
                         AND (%s::text IS NULL OR wait_event = %s)""",
            [SERVER_APPLICATION_NAME, wait_event, wait_event],
        )
        return cur.fetchone()[0]


def server_connections() -> int:
    """Database sessions the server under test holds (not this process's, nor another test's)."""
    with connection.cursor() as cur:
        cur.execute(
            """SELECT count(*) FROM pg_stat_activity
                       WHERE datname = current_database() AND application_name = %s""",
            [SERVER_APPLICATION_NAME],
        )
        return cur.fetchone()[0]


@pytest.fixture
def tenant_token(make_user):
    tenant = Tenant.objects.create(name="Faults", slug="faults")
    user = make_user("faults-admin", Role.TENANT_ADMIN, tenant)
    _, token = actions.issue_token(Actor.for_user(user), Principal.of(user), user=user, name="t")
    return tenant, token


def test_a_connection_killed_while_idle_is_replaced_before_the_next_request(
    processes,  # noqa: F811
    tenant_token,
):
    _, token = tenant_token
    url = wsgi(processes)
    assert call(f"{url}/api/reservations/", token)[0] == 200
    assert server_connections() == 1  # kept for the next request
    assert kill_backends() == 1
    for _ in range(3):
        status, _, body = call(f"{url}/api/reservations/", token)
        assert status == 200, body
    assert server_connections() == 1


def test_the_asgi_server_keeps_no_connection_per_request(processes, tenant_token):  # noqa: F811
    _, token = tenant_token
    url = web(processes)
    peak = 0
    for _ in range(40):
        assert call(f"{url}/api/reservations/", token)[0] == 200
        peak = max(peak, server_connections())
    # at most the last request or two's, closing as their responses end (kept ones reached 12) ...
    assert peak <= 2
    # ... and none is kept once the requests are over (a kept one would stay for CONN_MAX_AGE)
    deadline = time.monotonic() + 10
    while server_connections():
        assert time.monotonic() < deadline, "the ASGI server kept a database connection after its requests"
        time.sleep(0.05)


def test_a_connection_killed_mid_reservation_answers_503_and_leaves_nothing(
    processes,  # noqa: F811
    tenant_token,
):
    tenant, token = tenant_token
    fabric = make_fabric("faults", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    pool = make_pool(fabric, "faults", nodes=list(Node.objects.filter(fabric=fabric)))
    give_quota(tenant, pool, 32)
    url = wsgi(processes)
    start = timezone.now() + dt.timedelta(hours=1)
    payload = {
        "pool": pool.pk,
        "gpus": 8,
        "name": "survives",
        "start": start.isoformat(),
        "end": (start + dt.timedelta(hours=2)).isoformat(),
    }
    audits = AuditEntry.objects.count()
    # The audit row of the booking waits in a trigger: the reservation and its allocations are
    # written by then, uncommitted, in the server's transaction.
    with connection.cursor() as cur:
        cur.execute("""
            CREATE FUNCTION test_hold_audit() RETURNS trigger LANGUAGE plpgsql AS
              $$ BEGIN PERFORM pg_sleep(60); RETURN NEW; END $$;
            CREATE TRIGGER test_hold_audit BEFORE INSERT ON tenancy_auditentry
              FOR EACH ROW WHEN (NEW.action = 'reservation.create')
              EXECUTE FUNCTION test_hold_audit();""")
    try:
        answer: list = []
        post = threading.Thread(target=lambda: answer.append(call(f"{url}/api/reservations/", token, "POST", payload)))
        post.start()
        deadline = time.monotonic() + 30
        while not kill_backends("PgSleep"):
            assert time.monotonic() < deadline, "the booking never reached its audit row"
            time.sleep(0.05)
        post.join(60)
    finally:
        with connection.cursor() as cur:
            cur.execute("DROP TRIGGER test_hold_audit ON tenancy_auditentry;DROP FUNCTION test_hold_audit();")
    status, headers, body = answer[0]
    assert status == 503, body
    assert body["code"] == "unavailable" and headers.get("Retry-After") == "1"
    assert not Reservation.objects.exists() and not ReservationAllocation.objects.exists()
    assert AuditEntry.objects.count() == audits
    # the retry (what a client told 503 does) books it once
    status, _, body = call(f"{url}/api/reservations/", token, "POST", payload)
    assert status == 201, body
    assert list(Reservation.objects.values_list("name", flat=True)) == ["survives"]
    assert ReservationAllocation.objects.count() == 8
    assert AuditEntry.objects.filter(action="reservation.create").count() == 1
