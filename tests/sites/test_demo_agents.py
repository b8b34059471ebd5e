"""The demo's labs are SM hosts like any other: ``manage.py up`` starts an agent for each lab
(nothing but the console's URL and a token in its environment), the demo reservations'
partitions are pushed through the agents and verified on the ports, and the agents stop with
``up``. Ports are read back here with the labs' own diags."""

from __future__ import annotations

import io
import time

import pytest

from console.demo import seed_all
from console.fabric import changes
from console.fabric.changes.pipeline import apply_change
from console.fabric.drivers import driver_for
from console.fabric.drivers.agent import AgentDriver
from console.fabric.lab.fabrics import lab_for, lab_status, stop_lab
from console.fabric.models import ChangeRequest, FabricAgent
from console.management.commands.up import Command as UpCommand
from console.telemetry import agent_reader
from console.tenancy.context import Actor
from scheduling.models import HCA, Reservation
from tests import servers
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import lab_data_dir  # noqa: F401 (fixture)

processes = servers.processes
pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(300), pytest.mark.django_db(transaction=True)]


def test_up_runs_an_agent_per_lab_and_the_demo_pushes_through_them(settings, lab_data_dir, processes):  # noqa: F811
    settings.DATA_DIR = lab_data_dir
    seed_all()
    said = io.StringIO()
    up = UpCommand(stdout=said)
    started = up._start_demo_labs()
    url = servers.web(processes)
    port = int(url.rsplit(":", 1)[1])
    agents = up._start_agents("127.0.0.1", port)
    try:
        # an agent per SM host: the first site's lab runs a standby OpenSM too
        assert len(started) == 2 and len(agents) == 3
        deadline = time.monotonic() + 60
        live = FabricAgent.objects.filter(connected=True)
        while live.filter(sm_state="MASTER").count() < 2 or live.filter(sm_state="STANDBY").count() < 1:
            assert time.monotonic() < deadline, "both labs' agents connected, the standby's too"
            time.sleep(0.2)
        for fabric, proc in agents:
            fabric.refresh_from_db()
            assert isinstance(driver_for(fabric), AgentDriver)
            assert proc.pid in {sm["agent_pid"] for sm in lab_status(fabric)["sms"]}
        # the first lab's SM host records mlxlink's readings, one module hot: read through its agent
        readings = agent_reader.phy(started[0])["readings"]
        hot = [key for key, doc in readings.items() if doc["temperature"] == 78.0]
        assert len(hot) == 1 and len(readings) == sum(s.nports for s in lab_for(started[0]).topology.switches())
        assert "port 1 running hot" in said.getvalue()
        # the demo reservations' partitions go through the agents
        for fabric in started:
            change = changes.reconcile(fabric, actor=Actor.system("test"))
            if change is not None:
                done = apply_change(change.pk, worker_id="test")
                assert done.status == ChangeRequest.Status.APPLIED, (done.error, done.outcome)
        for reservation in Reservation.objects.filter(status__in=["provisioning", "ready"]):
            reservation.refresh_from_db()
            assert reservation.status == "ready", reservation
            lab = lab_for(reservation.fabric)
            guid = int(HCA.objects.filter(node__in=reservation.allocations.values("node")).first().port_guid, 16)
            cas = {n.guid + 1: n.lid for n in lab.diags().ibnetdiscover().nodes.values() if not n.is_switch}
            assert lab.diags().pkeys(cas[guid]).membership(reservation.pkey) == "full"
    finally:
        up._stop_agents(agents)
        for fabric in started:
            stop_lab(fabric)
    assert all(proc.poll() is not None for _, proc in agents)
    for fabric, _ in agents:
        fabric.refresh_from_db()
        assert "agent" not in fabric.config
