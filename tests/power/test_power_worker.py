"""The whole path on a real Celery worker: the API's power-off commits ``powering-off``, publishes
``power.drive`` after commit, and the worker drives the BMC (sushy-emulator) to off."""

from __future__ import annotations

import time

from console.celery import app
from scheduling.models import Node
from tests.power.conftest import emulator_power
from tests.scheduling.conftest import make_fabric


def test_api_power_off_is_carried_out_by_the_worker(worker, operator, client_for, attach_bmc, redfish):
    assert not app.conf.task_always_eager
    fabric = make_fabric("worker", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    node = Node.objects.filter(fabric=fabric).order_by("pk").first()
    bmc = attach_bmc(node)
    reply = client_for(operator).post(f"/api/nodes/{node.pk}/power/", {"action": "off"}, format="json")
    assert reply.status_code == 202 and reply.json()["power_state"] == "powering-off"
    deadline = time.monotonic() + 40  # the emulator applies a reset 1 to 11 s later
    while Node.objects.get(pk=node.pk).power_state == "powering-off" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert Node.objects.get(pk=node.pk).power_state == "off"
    assert emulator_power(redfish, bmc) == "Off"
