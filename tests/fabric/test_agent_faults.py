"""Faults around the agent of a lab's SM host: the agent killed mid-push, the console's server
killed under a request, OpenSM killed, OpenSM restarted with a reset ``partitions.conf``. Each
recovers through the agent, with nothing stray on the wire (read back with the lab's diags)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from console.fabric import changes
from console.fabric.agents import services
from console.fabric.agents.rpc import AgentLost
from console.fabric.changes.pipeline import apply_change
from console.fabric.changes.requests import OPEN
from console.fabric.lab.manager import Lab
from console.fabric.models import ChangeRequest, FabricAgent
from console.tenancy.models import AuditEntry
from tests import servers
from tests.fabric import agent_fixtures
from tests.fabric.agent_fixtures import ACTOR, OPERATOR, hca_guids, membership, push_in_thread, until
from tests.fabric.conftest import requires_lab
from tests.servers import web

agent_lab = agent_fixtures.agent_lab
agents = agent_fixtures.agents
lab_data_dir = agent_fixtures.lab_data_dir
lab_fabric = agent_fixtures.lab_fabric
processes = agent_fixtures.processes
su1_revision = agent_fixtures.su1_revision

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(240), pytest.mark.django_db(transaction=True)]


def test_an_agent_killed_mid_push_resumes_on_its_return_with_nothing_stray(lab_fabric, processes, agents):
    fabric, lab = lab_fabric("agent-kill", agent=False)
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    fabric.driver = "agent"
    fabric.save()
    url = web(processes)
    agent = agents(url, fabric.name, str(lab.workdir), made.token)
    until(lambda: FabricAgent.objects.filter(pk=made.agent.pk, connected=True).exists(), 30, "the agent connected")
    g = hca_guids(fabric)
    for attempt in range(3):  # the push must still be running when the kill lands: tried again if not
        pkey = 0x0043 + attempt
        changes.set_partition(
            ACTOR, OPERATOR, fabric, name=f"res{attempt}", pkey=pkey, members=[f"{g['su01-n05']:#018x}"]
        )
        change = changes.request_change(ACTOR, OPERATOR, fabric)
        worker, outcome = push_in_thread(change.pk)
        # the agent swapped the files (it reloads and verifies next): held still there, so that its
        # result cannot go out first, and killed -9
        deadline = time.monotonic() + 30
        while f"{pkey:#06x}" not in lab.artefacts.read("partitions.conf"):
            assert time.monotonic() < deadline, "the push never swapped the files"
            time.sleep(0.005)
        os.killpg(agent.pid, signal.SIGSTOP)
        socket_before = FabricAgent.objects.get(pk=made.agent.pk).channel
        os.killpg(agent.pid, signal.SIGKILL)
        worker.join(60)
        if isinstance(outcome.get("error"), AgentLost):
            break
        assert not worker.is_alive() and not outcome, outcome  # it finished before the kill: again
        agent = agents(url, fabric.name, str(lab.workdir), made.token)
        until(
            lambda before=socket_before: (
                FabricAgent.objects.filter(pk=made.agent.pk, connected=True).exclude(channel=before).exists()
            ),
            30,
            "the agent back",
        )
    else:
        pytest.fail("in 3 tries the kill never landed while the push was running on the agent")
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
    assert membership(lab, g["su01-n05"], pkey) == "full"
    assert membership(lab, g["su01-n06"], pkey) is None
    assert AuditEntry.objects.filter(action="fabric.change.applied", object_id=str(change.pk)).count() == 1


def test_the_console_killed_mid_push_the_caller_counts_the_agent_lost_and_the_retry_applies(
    lab_fabric, processes, agents, settings
):
    """No ``lost`` comes from a server killed -9 under a request: the caller hears no ``alive``
    (sent on each of the agent's heartbeats) for AGENT_SILENT_AFTER_S and gives up, instead of
    waiting for the whole call's timeout (240 s); the retry goes through the restarted server."""
    settings.AGENT_SILENT_AFTER_S = 3.0
    fabric, lab = lab_fabric("agent-web-kill", agent=False)
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    fabric.driver = "agent"
    fabric.save()
    port = servers._free_port()
    url = f"http://127.0.0.1:{port}"
    argv = ("-m", "uvicorn", "console.asgi:application", "--host", "127.0.0.1", "--port", str(port))
    server = processes(*argv, "--lifespan", "off", "--log-level", "warning")
    servers._wait_http(url, "uvicorn")
    agent = agents(url, fabric.name, str(lab.workdir), made.token, "--heartbeat", "0.5")
    until(lambda: FabricAgent.objects.filter(pk=made.agent.pk, connected=True).exists(), 30, "the agent connected")
    g = hca_guids(fabric)
    changes.set_partition(ACTOR, OPERATOR, fabric, name="res", pkey=0x0046, members=[f"{g['su01-n11']:#018x}"])
    change = changes.request_change(ACTOR, OPERATOR, fabric)
    worker, outcome = push_in_thread(change.pk)
    # the agent swapped the files (it reloads and verifies next): held still there, so that its
    # result cannot go out first, and the server killed under it
    deadline = time.monotonic() + 30
    while "0x0046" not in lab.artefacts.read("partitions.conf"):
        assert time.monotonic() < deadline, "the push never swapped the files"
        time.sleep(0.005)
    os.killpg(agent.pid, signal.SIGSTOP)
    socket_before = FabricAgent.objects.get(pk=made.agent.pk).channel
    killed = time.monotonic()
    os.killpg(server.pid, signal.SIGKILL)
    os.killpg(agent.pid, signal.SIGCONT)
    worker.join(60)
    gave_up = time.monotonic() - killed
    assert isinstance(outcome.get("error"), AgentLost) and "went silent" in str(outcome["error"]), outcome
    assert gave_up < 3.0 + 5.0, gave_up  # the silence bound (and a heartbeat), not the call's 240 s
    # the server comes back on its address; the agent reconnects; the retry applies the change
    processes(*argv, "--lifespan", "off", "--log-level", "warning")
    servers._wait_http(url, "uvicorn")
    back = FabricAgent.objects.filter(pk=made.agent.pk, connected=True).exclude(channel=socket_before)
    until(back.exists, 30, "the agent back on a new socket")
    done = apply_change(change.pk, worker_id="w2")
    assert done.status == ChangeRequest.Status.APPLIED and done.attempts == 2, (done.error, done.outcome)
    assert membership(lab, g["su01-n11"], 0x0046) == "full"


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
