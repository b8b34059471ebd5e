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
import subprocess
import sys
from pathlib import Path

import pytest

from console.fabric import changes
from console.fabric.agents import services
from console.fabric.changes.pipeline import apply_change
from console.fabric.models import ChangeRequest, DiscoveryRun, Fabric, FabricAgent
from console.tenancy.models import AuditEntry, Role
from tests.fabric import agent_fixtures
from tests.fabric.agent_fixtures import ACTOR, OPERATOR, agent_log, apply_as_worker, hca_guids, membership, until
from tests.fabric.conftest import requires_lab
from tests.servers import ROOT, stop_all, web

agent_lab = agent_fixtures.agent_lab
agents = agent_fixtures.agents
lab_data_dir = agent_fixtures.lab_data_dir
lab_fabric = agent_fixtures.lab_fabric
processes = agent_fixtures.processes
su1_revision = agent_fixtures.su1_revision

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(240), pytest.mark.django_db(transaction=True)]


def test_a_partition_is_pushed_verified_and_released_through_the_agent(
    lab_fabric, processes, agents, client, make_user, lab_data_dir
):
    fabric, lab = lab_fabric("agent", agent=False)
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
    # (its agent saw OpenSM down during the restart: the task waits for it, as a worker does)
    assert apply_as_worker(repair.pk).status == ChangeRequest.Status.APPLIED
    assert membership(lab, g["su01-n01"], 0x0042) == "full"
    # released through the agent too
    changes.delete_partition(ACTOR, OPERATOR, fabric, name="res")
    change = apply_change(changes.request_change(ACTOR, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == ChangeRequest.Status.APPLIED, (change.error, change.outcome)
    assert membership(lab, g["su01-n01"], 0x0042) is None
    assert agent.poll() is None


def test_an_agent_acts_for_its_own_fabric_only_and_revoking_it_stops_it(lab_fabric, processes, agents):
    fabric, lab = lab_fabric("agent-auth", agent=False)
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

    from console.telemetry.agent_reader import RemoteMadSession
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
        # the collector's own MAD reader, over the helper on the SM host (relayed by the agent)
        assert isinstance(collector.reader, MadReader) and isinstance(collector.reader.session, RemoteMadSession)
        first = collector.sweep()  # the first sweep runs the slow checks too
        assert first.links == len(collector.lm.ends) > 0 and first.mads > 0
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


def test_an_sm_host_that_reads_its_counters_with_perfquery_sends_readings_the_collector_takes(agent_lab):
    """``manage.py agent --counters perfquery`` (a host where the MAD helper must not run): its
    ``mad`` operation says so, and the collector reads through ``read_counters`` instead."""
    from console.telemetry.agent_reader import AgentReader
    from console.telemetry.collector import CollectorOptions, FabricCollector

    served = agent_lab("agent-pq", "--counters", "perfquery", config={})
    collector = FabricCollector(served.fabric, CollectorOptions(lab_traffic=False, interval=0.2))
    collector.setup()
    try:
        assert isinstance(collector.reader, AgentReader)
        report = collector.sweep()
        assert report.links == len(collector.lm.ends) > 0 and report.mads == 0  # no MAD reader anywhere
        assert {s.up for s in collector.last_statuses.values()} == {True}
    finally:
        collector.close()


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

    fabric, lab = lab_fabric("agent-venv", agent=False)
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


def test_lab_up_starts_the_labs_agent_the_lab_is_an_sm_host_like_any_other_and_lab_down_stops_it(
    su1_revision, processes, lab_data_dir, settings
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
    settings.CONSOLE_URL = url  # (the default of --agent)
    call_command("lab", "up", "--design", design, "--name", "lab-agent-cli", "--json", stdout=out)
    status = json.loads(out.getvalue())
    fabric = Fabric.objects.get(pk=status["fabric_id"])
    try:
        pid = status["agent_pid"]
        assert pid and fabric.through_agent
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
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


def test_many_threads_of_one_process_ask_the_agent_at_once(agent_lab):
    # web requests in a threaded server, a worker's task beside them: each waits for its own answer
    from console.fabric.agents import rpc
    from tests.power.racing import race

    served = agent_lab("agent-threads")

    def five() -> list[str]:
        return [rpc.call(served.fabric, "sminfo", {}, timeout=20)["state"] for _ in range(5)]

    results = race(**{f"t{i}": five for i in range(6)})
    assert all(r == ["MASTER"] * 5 for r in results.values()), results
