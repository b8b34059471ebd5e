"""The agent on a lab's SM host: a real ``manage.py agent`` process with nothing but the
console's URL and its token (no DATABASE_URL, no REDIS_URL in its environment), connected to a
real uvicorn over a WebSocket; the pipeline pushes through it. The wire is read back here with
the lab's own diags, independently of the agent.

    test process (pipeline, apply_change) ── Redis channel layer ── uvicorn /ws/agent/
                                                                        │ WebSocket
                                          lab (ibsim + OpenSM) ── manage.py agent --lab
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.fabric import changes
from console.fabric.agents import services
from console.fabric.agents.rpc import AgentLost
from console.fabric.changes.pipeline import apply_change
from console.fabric.changes.requests import OPEN
from console.fabric.lab.manager import Lab
from console.fabric.models import ChangeRequest, DiscoveryRun, Fabric, FabricAgent
from console.tenancy.context import Actor
from console.tenancy.models import AuditEntry, Principal, Role
from designer.services import revision_graph
from tests import servers
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.servers import ROOT, stop_all, web

lab_data_dir = lab_fixtures.lab_data_dir
processes = servers.processes
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(240), pytest.mark.django_db(transaction=True)]
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
        fabric, lab = lab_fabric(name)
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


def test_a_partition_is_pushed_verified_and_released_through_the_agent(
    lab_fabric, processes, agents, client, make_user, lab_data_dir
):
    fabric, lab = lab_fabric("agent")
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    fabric.driver = "agent"
    fabric.save()
    url = web(processes)
    # quarter-KiB frames: every push result comes in parts the console puts together again
    agent = agents(url, fabric.name, str(lab.workdir), made.token, "--frame-kib", "0.25")
    row = until(
        lambda: FabricAgent.objects.filter(pk=made.agent.pk, connected=True, sm_state="MASTER").first(),
        30,
        "the agent connected with its OpenSM master",
    )
    assert row.host and row.version and row.port_guid.startswith("0x")
    # the API lists it as the issue spells it
    client.force_login(make_user("op", Role.OPERATOR))
    (listed,) = client.get(f"/api/fabrics/{fabric.pk}/agents/").json()
    assert {k: listed[k] for k in ("name", "connected", "sm_state")} == {
        "name": "smhost1",
        "connected": True,
        "sm_state": "MASTER",
    }
    assert set(listed) >= {"host", "version", "last_seen", "sm_priority", "port_guid"}

    g = hca_guids(fabric)
    changes.set_partition(
        ACTOR, OPERATOR, fabric, name="res", pkey=0x0042, members=[f"{g['su01-n01']:#018x}", f"{g['su01-n02']:#018x}"]
    )
    change = apply_change(changes.request_change(ACTOR, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == ChangeRequest.Status.APPLIED, (change.error, change.outcome)
    assert "sent the result of push in" in agent_log(lab_data_dir, 0)
    steps = list(change.steps.values_list("name", flat=True))
    assert steps[:1] == ["plan"] and "verify" in steps and "swap" in steps
    assert membership(lab, g["su01-n01"], 0x0042) == "full"
    assert membership(lab, g["su01-n03"], 0x0042) is None
    # the SM host reimaged: OpenSM back with a reset partitions.conf, the key gone from the ports
    store = lab.artefacts
    store.path("partitions.conf").write_text("Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;\n")
    lab.restart_sm(wait=True)
    assert membership(lab, g["su01-n01"], 0x0042) is None
    # the periodic verification (fabric.verify_all → reconcile) finds it through the agent and
    # pushes again, audited
    repair = changes.reconcile(fabric, actor=ACTOR)
    assert repair is not None and repair.reason == "reconcile: applied state not on the fabric"
    assert AuditEntry.objects.filter(action="fabric.applied.stale", object_id=str(fabric.pk)).count() == 1
    assert apply_change(repair.pk, worker_id="w").status == ChangeRequest.Status.APPLIED
    assert membership(lab, g["su01-n01"], 0x0042) == "full"
    # released through the agent too
    changes.delete_partition(ACTOR, OPERATOR, fabric, name="res")
    change = apply_change(changes.request_change(ACTOR, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == ChangeRequest.Status.APPLIED, (change.error, change.outcome)
    assert membership(lab, g["su01-n01"], 0x0042) is None
    assert agent.poll() is None


def test_an_agent_acts_for_its_own_fabric_only_and_revoking_it_stops_it(lab_fabric, processes, agents):
    fabric, lab = lab_fabric("agent-auth")
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    url = web(processes)
    # an agent that says it serves another fabric is refused, audited, and stops
    stray = agents(url, "some-other-fabric", str(lab.workdir), made.token)
    assert stray.wait(30) != 0
    refused = AuditEntry.objects.get(action="agent.refused")
    assert "some-other-fabric" in refused.after["why"]
    assert not FabricAgent.objects.get(pk=made.agent.pk).connected
    # a token nobody issued never connects
    bogus = agents(url, fabric.name, str(lab.workdir), "ibca_00000000_not-a-token")
    assert bogus.wait(30) != 0
    # the real one connects; revoked, its socket closes and it stops
    agent = agents(url, fabric.name, str(lab.workdir), made.token)
    until(lambda: FabricAgent.objects.filter(pk=made.agent.pk, connected=True).exists(), 30, "the agent connected")
    services.revoke_agent(ACTOR, OPERATOR, made.agent)
    assert agent.wait(30) != 0
    assert AuditEntry.objects.filter(action="agent.revoke").count() == 1


def test_an_agent_killed_mid_push_resumes_on_its_return_with_nothing_stray(lab_fabric, processes, agents):
    fabric, lab = lab_fabric("agent-kill")
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    fabric.driver = "agent"
    fabric.save()
    url = web(processes)
    agent = agents(url, fabric.name, str(lab.workdir), made.token)
    until(lambda: FabricAgent.objects.filter(pk=made.agent.pk, connected=True).exists(), 30, "the agent connected")
    g = hca_guids(fabric)
    changes.set_partition(ACTOR, OPERATOR, fabric, name="res", pkey=0x0043, members=[f"{g['su01-n05']:#018x}"])
    change = changes.request_change(ACTOR, OPERATOR, fabric)
    outcome: dict[str, object] = {}

    def push() -> None:
        try:
            apply_change(change.pk, worker_id="w")
        except Exception as exc:  # what the task's retry sees
            outcome["error"] = exc
        finally:
            from django.db import connection

            connection.close()

    worker = threading.Thread(target=push)
    worker.start()
    # the agent dies (kill -9) once its push reports the verify step
    until(lambda: change.steps.filter(name="verify").exists(), 30, "the push reaching verify on the agent")
    socket_before = FabricAgent.objects.get(pk=made.agent.pk).channel
    os.killpg(agent.pid, signal.SIGKILL)
    worker.join(60)
    assert isinstance(outcome.get("error"), AgentLost), outcome
    change.refresh_from_db()
    # still running, its lease released for the task's retry
    assert change.status in (ChangeRequest.Status.APPLYING, ChangeRequest.Status.VERIFYING) and change.lease_owner == ""
    # the agent comes back (its supervisor restarts it); the retry resumes the change
    agents(url, fabric.name, str(lab.workdir), made.token)
    until(
        lambda: FabricAgent.objects.filter(pk=made.agent.pk, connected=True).exclude(channel=socket_before).exists(),
        30,
        "the agent back on a new socket",
    )
    done = apply_change(change.pk, worker_id="w2")
    assert done.status == ChangeRequest.Status.APPLIED and done.attempts == 2, (done.error, done.outcome)
    # exactly the desired key on the wire: on its member, on nobody else
    assert membership(lab, g["su01-n05"], 0x0043) == "full"
    assert membership(lab, g["su01-n06"], 0x0043) is None
    assert AuditEntry.objects.filter(action="fabric.change.applied", object_id=str(change.pk)).count() == 1


def test_discovery_and_compare_run_on_the_agent_with_nothing_of_the_lab_here(agent_lab, worker, client_for, make_user):
    served = agent_lab("agent-disc", config={})  # nothing on the console's side knows where the lab is
    fabric, lab = served.fabric, served.lab
    api = client_for(make_user("op", Role.OPERATOR))
    base = f"/api/fabrics/{fabric.pk}"
    queued = api.post(f"{base}/discovery/")
    assert queued.status_code == 202, queued.content
    done = until(
        lambda: (j := api.get(queued.json()["url"]).json())["state"] not in ("queued", "running") and j, 60, "the job"
    )
    assert done["state"] == "done", done
    run = DiscoveryRun.objects.get(pk=done["discovery_id"])
    assert (run.summary["switches"], run.summary["cas"]) == (12, 256)
    # cabled as designed (an agent fabric is checked for rates too: ibsim's 4X SDR is not the design's)
    assert not (run.compare["missing"] or run.compare["extra"] or run.compare["miswired"])
    assert run.routing["in_use"] == "ftree"  # read from OpenSM's log on the SM host
    assert isinstance(run.summary["sm_log_mark"], int)
    current = api.get(f"{base}/compare/").json()
    assert current["discovery_id"] == run.pk and current["freshness"]["sm_swept_since"] is False
    # a cable pulled: OpenSM sweeps; the agent says so, and the compare discovers afresh through it
    leaf = lab.node_id("S-0002c90200000001")  # su01-leaf-r1
    mark = lab.sweep_mark()
    lab.unplug(leaf, 33)
    until(lambda: lab.swept_since(mark), 20, "OpenSM's sweep after the unplug")
    stored = api.get(f"{base}/compare/", {"discover": "false"}).json()
    assert stored["freshness"]["sm_swept_since"] is True and stored["freshness"]["stale"]
    fresh = api.get(f"{base}/compare/").json()
    assert fresh["discovered_now"] and fresh["discovery_id"] > run.pk
    assert [(m["a"], m["a_port"], m["b"]) for m in fresh["missing"]] == [("su01-leaf-r1", 33, "spine-01")]


def test_the_live_collector_reads_the_counters_and_the_routing_through_the_agent(agent_lab, make_user):
    import json

    from websockets.sync.client import connect

    from console.telemetry.collector import CollectorOptions, FabricCollector
    from console.telemetry.readers import MadReader
    from tests.live.helpers import token_for

    served = agent_lab("agent-live", config={})  # the collector cannot reach the lab but through the agent
    fabric, lab = served.fabric, served.lab
    # four switches a part: the agent streams each part's counters back as it reads them
    collector = FabricCollector(fabric, CollectorOptions(lab_traffic=False, interval=0.2, read_chunk_switches=4))
    collector.setup()
    try:
        assert len(collector._chunks(collector.lm.measured_ports())) == 3  # 12 switches
        first = collector.sweep()  # the first sweep runs the slow checks too
        assert first.links == len(collector.lm.ends) > 0 and first.mads > 0  # the agent's MAD reader
        assert sorted(collector.chunk_at) == [0, 1, 2]  # three parts came, one after the other
        assert list(collector.chunk_at.values()) == sorted(collector.chunk_at.values())
        assert collector.sm["in_use"] == "ftree" and collector.sm["state"] == "MASTER"
        assert collector.sm["agent"] == "smhost1"
        # what the agent read is what a reader on the lab's own port reads (links, states, errors)
        local = MadReader(lab.diags().env)
        local._start()
        try:
            ports = collector.lm.measured_ports()
            here = local.read(ports, collector.lm.switch_lids)
        finally:
            local.close()
        there = collector.prev
        assert set(there) == set(here)
        assert {k: r.state for k, r in there.items()} == {k: r.state for k, r in here.items()}
        assert {k: dict(r.errors) for k, r in there.items()} == {k: dict(r.errors) for k, r in here.items()}
        # a cable pulled on the lab: the next sweeps through the agent see the link down
        leaf = lab.node_id("S-0002c90200000001")  # su01-leaf-r1
        lab.unplug(leaf, 33)
        pulled = ("su01-leaf-r1", 33)
        link = next(
            e.link_id for e in collector.lm.ends.values() if pulled in ((e.switch, e.port), (e.peer, e.peer_port))
        )

        def down() -> bool:
            collector.sweep()
            return not collector.last_statuses[link].up

        until(down, 15, "the pulled cable seen down through the agent")
        # the live view: an operator's socket on the web process (which knows nothing of the
        # lab) gets the next sweep's deltas
        token = token_for(make_user("op-live", Role.OPERATOR))
        ws_url = served.url.replace("http://", "ws://") + f"/ws/live/fabric/{fabric.pk}/"
        with connect(ws_url, subprotocols=[f"bearer.{token}"], origin=served.url, open_timeout=10) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "hello"
            assert json.loads(ws.recv(timeout=10))["type"] == "subscribed"
            lab.replug(leaf, 33)
            seen: list[str] = []

            def delta() -> bool:
                collector.sweep()
                while True:
                    try:
                        message = json.loads(ws.recv(timeout=0.3))
                    except TimeoutError:
                        return False
                    seen.append(message["type"])
                    if message["type"] == "link.delta" and link in json.dumps(message):
                        return True

            until(delta, 20, "a delta of the replugged link on the operator's socket")
    finally:
        collector.close()


def test_opensm_killed_is_an_alarm_and_a_reservation_made_meanwhile_is_ready_soon_after_it_returns(
    agent_lab, worker, tenant_a
):
    from console.telemetry.agents import watch
    from console.telemetry.models import FabricEvent
    from scheduling.models import Reservation
    from scheduling.services import power, quotas
    from tests.fabric.lab_fixtures import book, whole_lab_pool

    served = agent_lab("agent-smdown", "--heartbeat", "0.5")
    fabric, lab, made = served.fabric, served.lab, served.made
    pool = whole_lab_pool(fabric, ACTOR)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    # a fabric in service: a first reservation ready (its QoS class made OpenSM restart once)
    first = book(pool, tenant_a, 16, "before")
    until(lambda: Reservation.objects.filter(pk=first.pk, status=Reservation.Status.READY).exists(), 60, "ready")
    until(lambda: not ChangeRequest.objects.filter(fabric=fabric, status__in=OPEN).exists(), 30, "a quiet fabric")
    # OpenSM dies on its host: the agent's next heartbeat says so, and that is an alarm
    lab = Lab.attach(lab.workdir)  # as it is now: the agent's pushes restarted its OpenSM
    os.kill(lab.status()["opensm_pid"], signal.SIGKILL)
    until(lambda: FabricAgent.objects.filter(pk=made.agent.pk, sm_state="NO ANSWER").exists(), 10, "NO ANSWER")
    watch()
    alarm = FabricEvent.objects.get(kind="sm_state", subject="sm-smhost1", status="open")
    assert alarm.severity == "critical"
    # a reservation made meanwhile waits, and says for what (the worker tries its push meanwhile)
    reservation = book(pool, tenant_a, 16, "while-down")
    until(lambda: ChangeRequest.objects.filter(fabric=fabric).exists(), 10, "the reservation's change")
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.PROVISIONING, reservation.status
    step = power.progress([reservation])[reservation.pk]
    assert step is not None and step["message"] == "waiting for the subnet manager on smhost1", step
    # OpenSM back: ready within 10 s of its return, the key on its ports
    lab.restart_sm(wait=True)
    back = time.monotonic()
    try:
        until(
            lambda: Reservation.objects.filter(pk=reservation.pk, status=Reservation.Status.READY).exists(),
            30,
            "the reservation ready",
        )
    except AssertionError:
        for c in ChangeRequest.objects.filter(fabric=fabric).order_by("pk"):
            print(
                "CHANGE",
                c.pk,
                c.status,
                c.attempts,
                c.lease_owner,
                c.error[:300],
                list(c.steps.values_list("name", "status", "log")),
            )
        raise
    assert time.monotonic() - back <= 10
    assert power.progress([Reservation.objects.get(pk=reservation.pk)])[reservation.pk] is None
    guids = {int(g, 16) for g in reservation.allocations.values_list("node__hcas__port_guid", flat=True)}
    diags = lab.diags()
    lid_of = {n.guid + 1: n.lid for n in diags.ibnetdiscover().nodes.values() if not n.is_switch}
    assert len(guids) == 16 and {diags.pkeys(lid_of[g]).membership(reservation.pkey) for g in guids} == {"full"}
    watch()
    alarm.refresh_from_db()
    assert alarm.status == "resolved"


@pytest.fixture(scope="module")
def agent_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent installed as docs/deploy.md says: its own virtualenv, ``pip install`` of the
    repository's package (the Python packages, pyproject.toml and the pins), nothing else."""
    import shutil

    root = tmp_path_factory.mktemp("agent-install")
    source = root / "src"
    source.mkdir()
    for name in ("console", "designer", "scheduling"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("pyproject.toml", "README.md", "constraints.txt"):
        shutil.copy(ROOT / name, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "install", "-q", "-c", str(source / "constraints.txt"), str(source)]
    done = subprocess.run(pip, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def test_the_agent_installed_in_its_own_virtualenv_runs_with_only_the_console_url_and_its_token(
    agent_venv, lab_fabric, processes, lab_data_dir, tmp_path
):
    import io
    import json

    from django.core.management import call_command

    fabric, lab = lab_fabric("agent-venv")
    # on the console: the agent's token, from the CLI as the guide says (shown once)
    out = io.StringIO()
    call_command("fabric", "agent", "create", "--fabric", fabric.name, "--name", "smhost1", "--json", stdout=out)
    made = json.loads(out.getvalue())
    fabric.driver = "agent"
    fabric.save()
    url = web(processes)
    # on the SM host: the token in a file, the installed command, the console's URL; no database,
    # no broker, no checkout of the console
    token = tmp_path / "agent.token"
    token.write_text(made["token"] + "\n")
    token.chmod(0o600)
    env = {"PATH": f"{agent_venv / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    argv = [str(agent_venv / "bin" / "ibconsole"), "agent", "--console", url, "--fabric", fabric.name]
    argv += ["--token-file", str(token), "--lab", str(lab.workdir)]
    log = open(tmp_path / "agent.log", "wb")
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        until(lambda: FabricAgent.objects.filter(pk=made["id"], sm_state="MASTER").exists(), 60, "the agent's SM")
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        assert not [v for v in environ if v.startswith((b"DATABASE_URL=", b"REDIS_URL=", b"DJANGO_"))]
        assert Path(f"/proc/{proc.pid}/cmdline").read_text().split("\0")[0].startswith(str(agent_venv))
        g = hca_guids(fabric)
        changes.set_partition(ACTOR, OPERATOR, fabric, name="res", pkey=0x0044, members=[f"{g['su01-n07']:#018x}"])
        change = apply_change(changes.request_change(ACTOR, OPERATOR, fabric).pk, worker_id="w")
        assert change.status == ChangeRequest.Status.APPLIED, (change.error, (tmp_path / "agent.log").read_text())
        assert membership(lab, g["su01-n07"], 0x0044) == "full"
    finally:
        stop_all([proc])


def test_lab_up_with_agent_makes_the_lab_an_sm_host_like_any_other_and_lab_down_stops_it(
    su1_revision, processes, lab_data_dir
):
    import io
    import json

    from django.core.management import call_command

    from console.fabric.drivers import driver_for
    from console.fabric.drivers.agent import AgentDriver
    from console.fabric.lab.fabrics import lab_for

    url = web(processes)
    design = f"{su1_revision.design.name}/{su1_revision.number}"
    out = io.StringIO()
    call_command("lab", "up", "--design", design, "--name", "lab-agent-cli", "--agent", url, "--json", stdout=out)
    status = json.loads(out.getvalue())
    fabric = Fabric.objects.get(pk=status["fabric_id"])
    try:
        pid = status["agent_pid"]
        assert pid and fabric.config["agent"] is True and fabric.through_agent
        until(lambda: FabricAgent.objects.filter(fabric=fabric, name="lab", sm_state="MASTER").exists(), 30, "agent")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert not [v for v in environ if v.startswith((b"DATABASE_URL=", b"REDIS_URL="))]
        g = hca_guids(fabric)
        changes.set_partition(ACTOR, OPERATOR, fabric, name="res", pkey=0x0045, members=[f"{g['su01-n09']:#018x}"])
        change = apply_change(changes.request_change(ACTOR, OPERATOR, fabric).pk, worker_id="w")
        assert change.status == ChangeRequest.Status.APPLIED, change.error
        assert isinstance(driver_for(fabric), AgentDriver)  # the push went through the agent
        assert membership(lab_for(fabric), g["su01-n09"], 0x0045) == "full"
    finally:
        call_command("lab", "down", "--fabric", fabric.name, stdout=io.StringIO())
    fabric.refresh_from_db()
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    assert "agent" not in fabric.config


def test_opensm_restarted_with_a_reset_partitions_conf_gets_its_keys_back_at_once(agent_lab, worker):
    served = agent_lab("agent-restart", "--heartbeat", "0.5")
    fabric, lab = served.fabric, served.lab
    g = hca_guids(fabric)
    changes.set_partition(ACTOR, OPERATOR, fabric, name="res", pkey=0x0046, members=[f"{g['su01-n11']:#018x}"])
    changes.request_change(ACTOR, OPERATOR, fabric)
    until(lambda: membership(lab, g["su01-n11"], 0x0046) == "full", 30, "the key on its port")
    until(lambda: not ChangeRequest.objects.filter(fabric=fabric, status__in=OPEN).exists(), 30, "a quiet fabric")
    before = FabricAgent.objects.get(pk=served.made.agent.pk).sm_activity
    assert before is not None and before > 0
    # the SM host reimaged between two heartbeats: OpenSM back at once, with a reset file
    lab = Lab.attach(lab.workdir)
    lab.artefacts.path("partitions.conf").write_text("Default=0x7fff, ipoib : ALL=limited, SELF=full ;\n")
    lab.restart_sm(wait=True)
    back = time.monotonic()
    # no periodic verification runs here (no beat): the agent's report of a restarted OpenSM
    # (its activity count started again) is what brings the key back, audited
    until(lambda: membership(lab, g["su01-n11"], 0x0046) == "full", 30, "the key back on its port")
    assert time.monotonic() - back < 20
    assert AuditEntry.objects.filter(action="fabric.applied.stale", object_id=str(fabric.pk)).exists()


def test_many_threads_of_one_process_ask_the_agent_at_once(agent_lab):
    # web requests in a threaded server, a worker's task beside them: each waits for its own answer
    from console.fabric.agents import rpc
    from tests.power.racing import race

    served = agent_lab("agent-threads")

    def five() -> list[str]:
        return [rpc.call(served.fabric, "sminfo", {}, timeout=20)["state"] for _ in range(5)]

    results = race(**{f"t{i}": five for i in range(6)})
    assert all(r == ["MASTER"] * 5 for r in results.values()), results
