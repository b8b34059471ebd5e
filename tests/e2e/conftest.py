"""Browser tests: pytest-playwright driving Debian's Chromium against a live server.

No browser download: Playwright launches /usr/bin/chromium. Screenshots and traces of failures
land in test-artifacts/ (see the --output/--screenshot options in pyproject.toml).
"""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Also used by tests/benchmarks/bench_designer_canvas.py.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@pytest.fixture(scope="session", autouse=True)
def _allow_orm_beside_playwright(django_db_setup):
    # Playwright's sync API runs an event loop in the test thread for the rest of the session; the
    # ORM calls made by fixtures in that same thread are still synchronous and safe. Browser tests
    # run last (tests/conftest.py), so this relaxation never covers the asyncio-based tests.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": list(CHROMIUM_ARGS),
    }


def sign_in(page, base_url: str, username: str, password: str = "pw-12345678"):
    """Log ``page`` in through the login form as ``username``; it lands on the home page."""
    page.goto(f"{base_url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/")
    return page


@pytest.fixture
def login(page, live_server):
    def do(username: str, password: str = "pw-12345678"):
        return sign_in(page, live_server.url, username, password)

    return do


@pytest.fixture(autouse=True)
def _flush_outwaits_stray_requests(django_db_blocker):
    """The teardown's flush (one TRUNCATE of every table, locked one by one) may meet a request the
    browser started before the test ended, still reading in the live server's thread. If that
    request locks tables in the opposite order, PostgreSQL aborts whichever waiter checks for a
    deadlock first, which is the one waiting longest: the flush. Once that happened the next test
    found the previous test's rows. With a longer wait before its check on the test's own
    connection, the stray request is the one aborted, and its test is over anyway."""
    from django.db import DatabaseError, connection

    with django_db_blocker.unblock():
        if connection.vendor == "postgresql":
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SET deadlock_timeout = '10s'")  # a superuser's setting (the test role)
            except DatabaseError:
                pass  # another role: the default wait
    yield
