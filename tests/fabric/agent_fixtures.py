"""Fixtures and helpers of the agent tests on a lab's SM host (``test_agent_lab.py``,
``test_agent_faults.py``): a real ``manage.py agent`` process with nothing but the console's URL
and its token, connected to a real uvicorn; the wire read back with the lab's own diags.

Import the fixtures into a test module (``from tests.fabric.agent_fixtures import ...``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.fabric.agents import services
from console.fabric.changes.pipeline import apply_change
from console.fabric.lab.manager import Lab
from console.fabric.models import Fabric, FabricAgent
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from designer.services import revision_graph
from tests import servers
from tests.fabric import lab_fixtures
from tests.servers import ROOT, stop_all, web

lab_data_dir = lab_fixtures.lab_data_dir
processes = servers.processes
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)


@pytest.fixture
def agents(lab_data_dir: Path) -> Iterator:
    """Factory: start ``manage.py agent`` as an SM host would run it; stopped at teardown."""
    started: list[subprocess.Popen] = []

    def start(console: str, fabric: str, workdir: str, token: str, *extra: str) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "TEST_DATABASE_URL")}
        env["IBCONSOLE_AGENT_TOKEN"] = token
        env["CONSOLE_DATA_DIR"] = str(lab_data_dir / f"agent-{len(started)}")  # its own: it has no database
        log = open(lab_data_dir / f"agent-{len(started)}.log", "wb")
        argv = [
            sys.executable,
            "manage.py",
            "agent",
            "--console",
            console,
            "--fabric",
            fabric,
            "--lab",
            workdir,
            *extra,
        ]
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        return proc

    yield start
    stop_all(started)


@dataclass
class AgentLab:
    """A lab fabric served by a real agent: the fabric (driver ``agent``), its lab, the agent's
    credentials, the console's URL and the agent's process."""

    fabric: Fabric
    lab: Any
    made: Any
    url: str
    proc: subprocess.Popen


@pytest.fixture
def agent_lab(lab_fabric, processes, agents) -> Iterator[Callable[..., AgentLab]]:
    """Factory: ``agent_lab("x", *agent_args, config={})`` starts a lab, makes its fabric an agent
    fabric (``config``: what the console keeps of it; {}: nothing that finds the lab), starts the
    console and the agent, and returns once the agent reported its OpenSM master."""

    workdirs: list[Path] = []

    def start(name: str, *args: str, config: dict | None = None) -> AgentLab:
        fabric, lab = lab_fabric(name, agent=False)
        workdirs.append(lab.workdir)  # (the fabric may forget where its lab is: stopped here)
        made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
        fabric.driver = "agent"
        if config is not None:
            fabric.config = config
        fabric.save()
        url = web(processes)
        proc = agents(url, fabric.name, str(lab.workdir), made.token, *args)
        until(lambda: FabricAgent.objects.filter(pk=made.agent.pk, sm_state="MASTER").exists(), 30, "the agent's SM")
        return AgentLab(fabric, lab, made, url, proc)

    yield start
    for workdir in workdirs:
        Lab.attach(workdir).stop()


def hca_guids(fabric) -> dict[str, int]:
    """The port GUID of each node's HCA-1, from the fabric's design."""
    return {n.name: n.port_guids[0] for n in revision_graph(fabric.revision).nodes.values()}


def membership(lab, guid: int, pkey: int) -> str | None:
    """The port's membership of ``pkey``, read from its P_Key table with smpquery."""
    lid = {n.guid + 1: n.lid for n in lab.diags().ibnetdiscover().nodes.values() if not n.is_switch}[guid]
    return lab.diags().pkeys(lid).membership(pkey)


def agent_log(data_dir: Path, n: int) -> str:
    """What the n-th agent started by the fixture printed."""
    return (data_dir / f"agent-{n}.log").read_text(errors="replace")


def until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {seconds:.0f}s")
        time.sleep(0.2)


def push_in_thread(change_id: int) -> tuple[threading.Thread, dict[str, object]]:
    """``apply_change`` on a thread of its own, as a worker runs it (started); the error it ends
    with (what the task's retry sees), if any, in the dict under ``error``."""
    outcome: dict[str, object] = {}

    def push() -> None:
        try:
            apply_change(change_id, worker_id="w")
        except Exception as exc:
            outcome["error"] = exc
        finally:
            from django.db import connection

            connection.close()

    worker = threading.Thread(target=push)
    worker.start()
    return worker, outcome


def apply_as_worker(change_id: int, seconds: float = 60.0):
    """``apply_change`` as the task runs it: a transient error (the agent's OpenSM not answering
    for a moment, no master reported yet) is retried, as the task's autoretry does."""
    from console.fabric.changes.pipeline import TRANSIENT, apply_change

    deadline = time.monotonic() + seconds
    while True:
        try:
            change = apply_change(change_id, worker_id="w")
        except TRANSIENT as exc:
            assert time.monotonic() < deadline, f"change {change_id} still not applied: {exc}"
            time.sleep(0.5)
            continue
        assert change is not None
        return change
