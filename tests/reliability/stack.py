"""The console as real processes for the reliability tests: a private Redis, web (uvicorn), a
Celery worker, beat and the collector, each killable with ``kill -9`` and restartable; plus the
lab fabric with its inventory, pool and quotas that the tests book on.

Every process uses this test run's database (the ``test_…`` database pytest-django created; the
tests are ``transaction=True`` so the processes see committed rows) and the private Redis, never
the machine's shared one, so the tests may restart it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from console.fabric.agents.services import lab_agent
from console.fabric.lab.fabrics import start_lab, stop_lab
from console.fabric.lab.manager import Lab
from console.fabric.models import Fabric, FabricAgent
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role, Tenant
from designer.services import create_design
from scheduling.models import HCA, Node, Pool
from scheduling.services import inventory, quotas
from tests.servers import SERVER_APPLICATION_NAME, _free_port, _wait_http

ROOT = Path(__file__).resolve().parents[2]
ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition") -> Any:
    """Poll ``predicate`` until truthy; returns its value or fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not met within {timeout}s")
        time.sleep(interval)


def database_url() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    host = s["HOST"] or "127.0.0.1"
    return f"postgres://{auth}@{host}:{s['PORT'] or 5432}/{s['NAME']}?application_name={SERVER_APPLICATION_NAME}"


class Redis:
    """A private ``redis-server`` on a free port, without persistence: a restart loses every
    queued message, the worst a broker restart can do."""

    def __init__(self, workdir: Path) -> None:
        self.port = _free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        redis_server = shutil.which("redis-server") or "/usr/bin/redis-server"
        argv = [redis_server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(
            [*argv, "--dir", str(self.workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        import redis

        client = redis.Redis(port=self.port)
        wait_for(lambda: _pings(client), timeout=10, what="redis-server up")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def _pings(client: Any) -> bool:
    try:
        return bool(client.ping())
    except Exception:
        return False


@dataclass
class Process:
    """One console process (its own process group: ``kill -9`` takes its children too)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    ready: Callable[[Process], bool]
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self, timeout: float = 60) -> None:
        self.starts += 1
        self.proc = subprocess.Popen(
            [sys.executable, *self.argv],
            cwd=ROOT,
            env=self.env,
            stdout=open(self.log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(lambda: self.ready(self) or self.proc.poll() is not None, timeout=timeout, what=f"{self.name} up")
        assert self.proc.poll() is None, f"{self.name} died: {self.log.read_text(errors='replace')[-3000:]}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def _log_says(text: str) -> Callable[[Process], bool]:
    def ready(process: Process) -> bool:
        # the marker must appear once more than in earlier runs of this process
        return process.log_text().count(text) >= process.starts

    return ready


@dataclass
class Stack:
    """web + worker + beat + collector on a private Redis, for one lab fabric."""

    workdir: Path
    fabric: Fabric | None = None
    redis: Redis | None = None
    processes: dict[str, Process] = field(default_factory=dict)
    web_port: int = 0

    def env(self) -> dict[str, str]:
        assert self.redis is not None
        env = dict(os.environ)
        env.update(
            DATABASE_URL=database_url(),
            REDIS_URL=self.redis.url,
            CONSOLE_DATA_DIR=str(self.workdir / "data"),
            CELERY_QUEUE="console",
            PYTHONUNBUFFERED="1",
            DJANGO_ALLOW_ASYNC_UNSAFE="",
        )
        env.pop("CONSOLE_DB_CONN_MAX_AGE", None)
        return env

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def add(self, name: str, argv: list[str], ready: Callable[[Process], bool], **env: str) -> Process:
        process = Process(name, argv, {**self.env(), **env}, self.workdir / f"{name}.log", ready)
        self.processes[name] = process
        return process

    def start(self, *names: str) -> None:
        """Start the named processes (all by default): web, the lab's agent (connected to web,
        as an SM host's is: the fabric is reached through nothing else), worker, beat,
        collector. Web and the agent start first whatever is named."""
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)
        if self.redis is None:
            self.redis = Redis(self.workdir)
        if not self.processes:
            self.web_port = _free_port()
            web = ["-m", "uvicorn", "console.asgi:application", "--host", "127.0.0.1", "--port", str(self.web_port)]
            self.add("web", [*web, "--lifespan", "off", "--log-level", "warning"], self._web_ready)
            worker = ["-m", "celery", "-A", "console", "worker", "--pool", "solo", "-n", "chaos@%h"]
            self.add("worker", [*worker, "--without-gossip", "--without-mingle", "-l", "INFO"], _log_says(" ready."))
            beat = ["-m", "celery", "-A", "console", "beat", "-l", "INFO"]
            schedule = str(self.workdir / "celerybeat-schedule")
            # the beat's start line is INFO of celery.beat, quiet unless LOG_LEVEL=DEBUG (settings.LOGGING)
            self.add("beat", [*beat, "-s", schedule], _log_says("beat: Starting..."), LOG_LEVEL="DEBUG")
            if self.fabric is not None:
                self._add_agent(self.fabric)
                collector = ["manage.py", "collector", "--fabric", str(self.fabric.pk), "--interval", "0.5"]
                self.add("collector", collector, lambda p: p.proc is not None and _alive_for(p, 2.0))
        first = tuple(n for n in ("web", "agent") if n in self.processes and not self._running(n))
        for name in first + tuple(n for n in names or tuple(self.processes) if n not in first):
            if name not in first or not self._running(name):
                self.processes[name].start()

    def _running(self, name: str) -> bool:
        proc = self.processes[name].proc
        return proc is not None and proc.poll() is None

    def _add_agent(self, fabric: Fabric) -> None:
        """The lab's agent: ``manage.py agent --lab`` with only web's URL and its token (no
        database, no broker in its environment); up once it reported its OpenSM master. A lab
        with a standby OpenSM gets the standby's agent too (``agent-standby``), up once it
        reported its OpenSM answering."""
        workdir = str(fabric.config["workdir"])
        for sm in Lab.attach(workdir).sms:
            name = "lab" if sm == "primary" else f"lab-{sm}"
            made = lab_agent(ACTOR, fabric, name=name)
            argv = ["manage.py", "agent", "--console", self.url, "--fabric", fabric.name, "--lab", workdir]
            ready = (lambda p: _agent_master(fabric)) if sm == "primary" else (lambda p, n=name: _agent_up(fabric, n))
            agent = self.add("agent" if sm == "primary" else f"agent-{sm}", [*argv, "--lab-sm", sm], ready)
            agent.env = {k: v for k, v in agent.env.items() if not k.endswith(("DATABASE_URL", "REDIS_URL"))}
            agent.env.update(IBCONSOLE_AGENT_TOKEN=made.token, CONSOLE_DATA_DIR=str(self.workdir / f"agent-{sm}"))

    def _web_ready(self, process: Process) -> bool:
        try:
            _wait_http(self.url, "uvicorn", timeout=0.5)
            return True
        except AssertionError:
            return False

    def restart(self, name: str) -> None:
        self.processes[name].start()

    def stop(self) -> None:
        for process in self.processes.values():
            process.stop()
        if self.redis is not None:
            self.redis.stop()


def _agent_master(fabric: Fabric) -> bool:
    return FabricAgent.objects.filter(fabric=fabric, name="lab", connected=True, sm_state="MASTER").exists()


def _agent_up(fabric: Fabric, name: str) -> bool:
    live = FabricAgent.objects.filter(fabric=fabric, name=name, connected=True)
    return live.filter(sm_state__in=("MASTER", "STANDBY")).exists()


def _alive_for(process: Process, seconds: float) -> bool:
    """The collector logs nothing when healthy: up once it survived its start-up for a while."""
    started = getattr(process, "_t0", None)
    if started is None:
        process._t0 = time.monotonic()  # type: ignore[attr-defined]
        return False
    if time.monotonic() - started >= seconds:
        del process._t0  # type: ignore[attr-defined]
        return True
    return False


@dataclass
class LabPool:
    """A lab fabric of a 1-SU design, its inventory, pool ``su1`` and two tenants' quotas."""

    fabric: Fabric
    lab: Lab
    pool: Pool
    tenants: list[Tenant]

    def stop(self) -> None:
        self.fabric.refresh_from_db()
        stop_lab(self.fabric)


def lab_pool(
    workdir: Path, tenants: list[Tenant], *, quota_gpus: int = 64, borrow_gpus: int = 0, standby: bool = False
) -> LabPool:
    """Start the lab (with a standby OpenSM when ``standby``) and book-keep it: every tenant
    guaranteed ``quota_gpus`` of pool su1 (the SM hosts' nodes kept out, as the demo does)."""
    uid = uuid.uuid4().hex[:6]
    _, revision = create_design(ACTOR, OPERATOR, name=f"rel-{uid}", options=ONE_SU)
    fabric, lab = start_lab(
        revision, name=f"rel-{uid}", actor=ACTOR, workdir=workdir, socket_name=f"rel-{uid}", standby=standby
    )
    inventory.import_inventory(fabric, actor=ACTOR)
    nodes = list(Node.objects.filter(fabric=fabric))
    pool = inventory.create_pool(ACTOR, OPERATOR, fabric=fabric, name="su1", kind=Pool.Kind.BY_SU, nodes=nodes)
    for tenant in tenants:
        quotas.set_quota(
            ACTOR, OPERATOR, tenant=tenant, pool=pool, guaranteed_gpus=quota_gpus, borrow_limit_gpus=borrow_gpus
        )
    return LabPool(fabric, lab, pool, tenants)


def lid_of_port_guid(lab: Lab) -> dict[int, int]:
    """LID of every HCA port, by port GUID (ibsim: node GUID + 1), read with ibnetdiscover."""
    cas = (n for n in lab.diags(timeout=20).ibnetdiscover().nodes.values() if not n.is_switch)
    return {n.guid + 1: n.lid for n in cas if n.guid is not None}


def hca_guids(fabric: Fabric) -> dict[int, list[int]]:
    """HCA port GUIDs of every node of ``fabric``, by node id."""
    out: dict[int, list[int]] = {}
    for node_id, guid in HCA.objects.filter(node__fabric=fabric).values_list("node_id", "port_guid"):
        out.setdefault(node_id, []).append(int(guid, 16))
    return out
