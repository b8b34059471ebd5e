"""Shared fixtures: tenants, users of every role, API clients authenticated by session or token."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import caches
from rest_framework.test import APIClient

from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.models import Membership, Principal, Role, Tenant
from tests import needs

User = get_user_model()
_tally = needs.Tally()


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "needs(what): skipped without it (lab, postgresql, slurm, traces, prometheus), failed when"
        " CONSOLE_REQUIRE_<WHAT>=1 (slurm, prometheus: CONSOLE_REQUIRE_LAB=1)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Skip, or under CONSOLE_REQUIRE_<WHAT>=1 fail, a test whose environment is missing."""
    needs.check(item)


def pytest_collection_finish(session):
    _tally.collected(session.items)


def pytest_runtest_logreport(report):
    _tally.report(report)


def pytest_sessionfinish(session, exitstatus):
    """A run that demands the lab (say) fails when none of its lab tests passed."""
    unmet = _tally.unmet()
    if unmet and exitstatus == pytest.ExitCode.OK:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            for line in unmet:
                reporter.write_line(f"ERROR: {line}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(config, items):
    """Browser tests last: Playwright's sync API keeps an event loop running in the main thread
    for the rest of the session, which asyncio-based tests (Channels consumers) cannot share."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)


@pytest.fixture(autouse=True)
def _fresh_anonymous_throttle():
    """Every test's requests come from 127.0.0.1: start each with that address's "anon" budget
    whole (its counter lives in Redis, shared across tests and with the test servers)."""
    caches["throttle"].delete("throttle_anon_127.0.0.1")


def flush_broker() -> None:
    """Empty this run's Redis database of Celery's queues and results (no stale tasks), keeping
    the channel layer's keys (``asgi…``): the agents' sockets stay in their groups."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    stale = [key for key in client.scan_iter(count=1000) if not key.startswith(b"asgi")]
    for i in range(0, len(stale), 500):
        client.delete(*stale[i : i + 500])


@pytest.fixture
def worker(transactional_db):
    """A real Celery worker in this process (solo pool) on this run's broker: its own Redis
    database, emptied first (no stale tasks), or embedded mode's in-memory broker."""
    from celery.contrib.testing.worker import start_worker
    from django.conf import settings

    from console.celery import app

    if settings.REDIS_URL:
        flush_broker()
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30) as w:
        yield w


@pytest.fixture
def tenant_a(db) -> Tenant:
    return Tenant.objects.create(name="Tenant A", slug="tenant-a")


@pytest.fixture
def tenant_b(db) -> Tenant:
    return Tenant.objects.create(name="Tenant B", slug="tenant-b")


@pytest.fixture
def make_user(db):
    def make(username: str, role: str, tenant: Tenant | None = None, password: str = "pw-12345678"):
        user = User.objects.create_user(username, password=password)
        Membership.objects.create(user=user, role=role, tenant=tenant)
        return user

    return make


@pytest.fixture
def operator(make_user):
    return make_user("op", Role.OPERATOR)


@pytest.fixture
def auditor(make_user):
    return make_user("aud", Role.AUDITOR)


@pytest.fixture
def admin_a(make_user, tenant_a):
    return make_user("admin-a", Role.TENANT_ADMIN, tenant_a)


@pytest.fixture
def member_a(make_user, tenant_a):
    return make_user("member-a", Role.TENANT_MEMBER, tenant_a)


@pytest.fixture
def admin_b(make_user, tenant_b):
    return make_user("admin-b", Role.TENANT_ADMIN, tenant_b)


@pytest.fixture
def member_b(make_user, tenant_b):
    return make_user("member-b", Role.TENANT_MEMBER, tenant_b)


@pytest.fixture
def client_for():
    """An APIClient logged in as ``user`` through a real bearer token (the path scripts use)."""

    def make(user, *, read_only: bool = False) -> APIClient:
        _, plaintext = actions.issue_token(
            Actor.for_user(user), Principal.of(user), user=user, name="test", read_only=read_only
        )
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        return client

    return make


@pytest.fixture
def session_client_for():
    def make(user) -> APIClient:
        client = APIClient(enforce_csrf_checks=True)
        client.force_login(user)
        return client

    return make


@pytest.fixture
def subprocess_env(transactional_db) -> dict[str, str]:
    """Environment for a ``manage.py`` subprocess that must see this test's database."""
    import os

    from django.db import connection

    s = connection.settings_dict
    env = dict(os.environ)
    if connection.vendor == "postgresql":
        auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
        env["DATABASE_URL"] = f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    return env


@pytest.fixture(scope="session")
def lab_console(django_db_setup, tmp_path_factory):
    """The console the lab fabrics' agents connect to, as on real SM hosts: one uvicorn for the
    session on the test database and Redis (``tests.fabric.lab_fixtures`` starts each lab's
    agent against it). Any process of the test (a worker, the test itself) reaches an agent
    through the channel layer, whichever server holds its socket."""
    from tests import servers

    started: list = []
    start = servers.spawner(tmp_path_factory.mktemp("lab-console"), started, servers.LAB_CONSOLE_APPLICATION_NAME)
    url = servers.web(start)
    yield url
    servers.stop_all(started)


@pytest.fixture
def empty_database():
    """Factory: the URL of a new, empty database on the test server (dropped at teardown)."""
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    port = db["PORT"] or 5432
    admin = dict(host=db["HOST"], port=port, user=db["USER"], password=db["PASSWORD"] or None, autocommit=True)
    made: list[str] = []

    def make(label: str) -> str:
        name = f"ibconsole_{label}_{len(made)}_{os.getpid()}"
        with psycopg.connect(dbname="postgres", **admin) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        auth = f"{db['USER']}:{db['PASSWORD']}@" if db["PASSWORD"] else f"{db['USER']}@"
        return f"postgres://{auth}{db['HOST']}:{port}/{name}"

    yield make
    with psycopg.connect(dbname="postgres", **admin) as conn:
        for name in made:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
