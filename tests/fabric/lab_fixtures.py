"""Fixtures for lab fabrics started from saved designs: own DATA_DIR, own sockets, torn down.

Import the fixtures into a test module (``from tests.fabric.lab_fixtures import ...``).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from console.fabric import changes
from console.fabric.changes.pipeline import apply_change
from console.fabric.lab.agent import start_lab_agent
from console.fabric.lab.fabrics import start_lab, stop_lab
from console.fabric.lab.manager import Lab
from console.fabric.models import ChangeRequest, Fabric, FabricAgent
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from designer.models import DesignRevision
from designer.services import create_design
from scheduling.models import Node, Pool, Reservation
from scheduling.services import inventory
from scheduling.services.reservations import ReservationRequest, reserve

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
ACTOR = Actor.system("test")


@pytest.fixture
def lab_data_dir(settings, tmp_path: Path) -> Path:
    """settings.DATA_DIR under tmp_path, so every lab workdir is the test's own."""
    settings.DATA_DIR = tmp_path / "data"
    return settings.DATA_DIR


@pytest.fixture
def su1_revision(db) -> DesignRevision:
    """A saved 1-SU rail-optimised design (32 DGX H100, 8 rail leaves, 4 spines, 256 HCAs)."""
    principal = Principal(None, Role.OPERATOR, None)
    _, revision = create_design(ACTOR, principal, name=f"su1-{uuid.uuid4().hex[:6]}", options=ONE_SU)
    return revision


def with_agent(fabric: Fabric, console: str, timeout: float = 30.0, *, sm: str = "primary") -> Fabric:
    """Start the agent of ``fabric``'s running lab against ``console`` (what ``manage.py up`` and
    ``lab up`` do) and wait until it reported its OpenSM master: the fabric's pushes, reads and
    discoveries then go through it, as on a real SM host. The agent's credentials must be
    visible to the console's process (committed: a transactional test, or a module's lab)."""
    start_lab_agent(fabric, console, actor=ACTOR, sm=sm)
    deadline = time.monotonic() + timeout
    name, state = ("lab", "MASTER") if sm == "primary" else (f"lab-{sm}", "STANDBY")
    while not FabricAgent.objects.filter(fabric=fabric, name=name, connected=True, sm_state=state).exists():
        assert time.monotonic() < deadline, f"the agent of {fabric.name} did not report its OpenSM master"
        time.sleep(0.1)
    return fabric


@pytest.fixture
def lab_fabric(
    lab_data_dir: Path, su1_revision: DesignRevision, transactional_db, lab_console: str
) -> Iterator[Callable[..., tuple[Fabric, Lab]]]:
    """Factory: ``lab_fabric("a")`` starts a lab of the 1-SU design as fabric ``a-<uid>``, with
    its own socket name, and its agent (``agent=False``: none, for a test that starts its own);
    every lab it started is stopped at teardown (its agent with it)."""
    started: list[Fabric] = []

    def start(
        name: str = "lab", revision: DesignRevision | None = None, *, agent: bool = True, standby: bool = False
    ) -> tuple[Fabric, Lab]:
        uid = uuid.uuid4().hex[:6]
        fabric, lab = start_lab(
            revision or su1_revision,
            name=f"{name}-{uid}",
            actor=ACTOR,
            socket_name=f"t-{name}-{uid}",
            standby=standby,
        )
        started.append(fabric)
        if agent:
            with_agent(fabric, lab_console)
        if agent and standby:
            with_agent(fabric, lab_console, sm="standby")
        return fabric, lab

    yield start
    for fabric in started:
        fabric.refresh_from_db()
        stop_lab(fabric)


def routing_passes(lab: Lab) -> int:
    """How many routing passes OpenSM has logged so far."""
    text = lab.opensm_log.read_text(errors="replace")
    return text.count("tables configured on all switches")


def wait_for_new_routing_pass(lab: Lab, before: int, timeout: float = 15.0) -> int:
    """Poll until OpenSM logged a routing pass after ``before`` passes; returns the new count."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = routing_passes(lab)
        if now > before:
            return now
        time.sleep(0.1)
    raise AssertionError(f"no new routing pass within {timeout}s")


def whole_lab_pool(fabric: Fabric, actor: Actor = ACTOR, name: str = "su1") -> Pool:
    """The lab's nodes imported into the inventory and pooled (by SU), as an operator would."""
    inventory.import_inventory(fabric, actor=actor)
    return inventory.create_pool(
        actor,
        Principal(None, Role.OPERATOR, None),
        fabric=fabric,
        name=name,
        kind=Pool.Kind.BY_SU,
        nodes=list(Node.objects.filter(fabric=fabric)),
    )


def book(pool: Pool, tenant, gpus: int, name: str, *, actor: Actor = ACTOR) -> Reservation:
    """A reservation of ``gpus`` GPUs for two hours from now, made through the service: placed
    and waiting for the fabric (provisioning)."""
    request = ReservationRequest(
        pool_id=pool.pk, gpus=gpus, duration=dt.timedelta(hours=2), name=name, tenant_id=tenant.pk
    )
    reservation = reserve(actor, Principal(None, Role.OPERATOR, None), request)
    assert reservation.status == Reservation.Status.PROVISIONING, reservation.reason
    return reservation


def converge(fabric: Fabric, *, actor: Actor = ACTOR) -> ChangeRequest:
    """What the ``fabric.reconcile`` task does: one change for the new desired state, applied."""
    change = changes.reconcile(fabric, actor=actor)
    assert change is not None, "the desired partitions did not produce a change"
    applied = apply_change(change.pk, worker_id="test")
    assert applied is not None and applied.status == ChangeRequest.Status.APPLIED, applied and (
        applied.error,
        applied.outcome,
    )
    return applied
