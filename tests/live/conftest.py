"""Fixtures for the live fabric: lab fabrics (own workdir and ibsim socket, torn down), two
tenants with ready reservations, sockets."""

from __future__ import annotations

import uuid

import pytest

from console.tenancy.models import Principal, Role
from designer.models import DesignRevision
from designer.services import create_design
from tests.fabric import lab_fixtures
from tests.fabric.lab_fixtures import ACTOR
from tests.live import fabric_fixtures
from tests.live.helpers import open_live_page
from tests.servers import processes  # noqa: F401

lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

TWO_SU = {"topology": "rail-optimized", "gpus": 512, "node_type": "DGX-H100", "switch": "QM9700"}
ORIGIN = (b"origin", b"http://127.0.0.1:8000")


@pytest.fixture
def su2_revision(db) -> DesignRevision:
    """Two scalable units (64 DGX H100, 16 rail leaves, 8 spines): placement matters."""
    principal = Principal(None, Role.OPERATOR, None)
    _, revision = create_design(ACTOR, principal, name=f"su2-{uuid.uuid4().hex[:6]}", options=TWO_SU)
    return revision


world = fabric_fixtures.world


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """Debian's Chromium, as in tests/e2e (no browser download)."""
    from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS

    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": list(CHROMIUM_ARGS)}


@pytest.fixture(scope="module")
def orm_beside_playwright():
    # Playwright's sync API keeps an event loop in the test thread; the test's own ORM calls
    # (and the database flush after it) stay synchronous and safe (see tests/e2e/conftest.py).
    # Module-scoped so it outlives the flush; browser tests run last (tests/conftest.py).
    import os

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def operator_live_page(orm_beside_playwright, world, processes, browser, operator):  # noqa: F811
    """The operator's live page of the world's fabric in Chromium, against uvicorn (no lab: the
    test drives the collector), with every link up; ``(page, statuses)``."""
    return open_live_page(processes, browser, world)
