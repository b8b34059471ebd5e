"""Fixtures for the push pipeline tests: a Fabric bound to its own real lab, operators, helpers.

Import the fixtures into a test module with ``from tests.fabric.pipeline_fixtures import *``.
Every lab gets its own workdir and ibsim socket under ``tmp_path`` and is stopped at teardown
(see ``start_lab`` in ``tests/fabric/conftest.py``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from console.fabric.lab.manager import Lab
from console.fabric.models import Fabric
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from designer.models import Design, DesignRevision
from tests.fabric.lab_fixtures import with_agent

__all__ = [
    "OPERATOR",
    "SYSTEM",
    "assert_error",
    "hca_guids",
    "lab_fabric",
    "lids",
    "make_fabric",
    "reservation_members",
    "revision",
    "wait_for",
]

OPERATOR = Principal(None, Role.OPERATOR, None)
SYSTEM = Actor.system("test")


def hca_guids(lab: Lab) -> dict[str, int]:
    """Port GUID of each HCA by node description (ibsim: node GUID + 1)."""
    return {n.description: n.guid + 1 for n in lab.topology.cas()}


def lids(lab: Lab) -> dict[str, int]:
    """LID of every node by name, as discovered now."""
    return {n.name: n.lid for n in lab.diags(timeout=10).ibnetdiscover().nodes.values()}


def reservation_members(lab: Lab, count: int = 16) -> list[list[str]]:
    """hca01…hca16 as members, every fourth one limited (what a reservation hands out)."""
    g = hca_guids(lab)
    return [[f"{g[f'hca{i:02d}']:#018x}", "limited" if i % 4 == 0 else "full"] for i in range(1, count + 1)]


def assert_error(response, status: int, code: str | None = None, field: str | None = None):
    """The API's one error body (``code``, ``detail``, ``fields``) with ``status``; returns it."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) >= {"code", "detail", "fields"}, body
    if code:
        assert body["code"] == code, body
    if field:
        assert field in body["fields"], body
    return body


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until truthy; returns its value or fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        time.sleep(interval)


@pytest.fixture
def revision(db) -> DesignRevision:
    """A design revision for fabrics to bind to (its graph is not read by the pipeline)."""
    design = Design.objects.create(name="lab-2x4x24", topology="fat-tree")
    return DesignRevision.objects.create(design=design, number=1, graph={}, summary={})


@pytest.fixture
def make_fabric(revision):
    """``make_fabric(name, driver="lab", **config)`` → a Fabric row."""

    def make(name: str = "lab", driver: str = "lab", **config: Any) -> Fabric:
        return Fabric.objects.create(name=name, driver=driver, revision=revision, config=config)

    return make


@pytest.fixture
def lab_fabric(start_lab, make_fabric, transactional_db, lab_console):
    """A running lab, the Fabric bound to it (``config.workdir``, as lab_for expects) and the
    lab's agent, through which the fabric's pushes go."""
    lab = start_lab("pipe")
    fabric = make_fabric("lab-pipe", workdir=str(lab.workdir), verify_timeout=8)
    return lab, with_agent(fabric, lab_console)
