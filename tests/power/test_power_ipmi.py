"""The IPMI driver (ipmitool, lanplus) against a real IPMI-over-LAN BMC: pyghmi's BMC server
class run as a process (console.power.ipmi_emulator), whose chassis changes power 1.5 s after a
command (a forced off at once)."""

from __future__ import annotations

import socket

import pytest

from console.power import ipmi_emulator, services
from console.power.models import PowerEvent
from scheduling.models import Node
from tests.power.conftest import SYSTEM_ACTOR, drive_to_end
from tests.scheduling.conftest import make_fabric

pytestmark = pytest.mark.django_db
PASSWORD = "ipmi-pass-1"


@pytest.fixture(scope="module")
def ipmi_bmc():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    running = ipmi_emulator.start(port, "admin", PASSWORD)
    yield running
    running.stop()


def _chassis(emulator) -> str | None:
    """The chassis power as a separate ipmitool session reads it."""
    return ipmi_emulator.chassis_power(emulator)


def test_ipmi_power_off_and_on(ipmi_bmc):
    fabric = make_fabric("ipmi", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    node = Node.objects.filter(fabric=fabric).order_by("pk").first()
    data = {"driver": "ipmi", "address": ipmi_bmc.address, "username": "admin", "password": PASSWORD}
    services.set_bmc(node.pk, actor=SYSTEM_ACTOR, data=data)
    assert _chassis(ipmi_bmc) == "on"
    services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    assert drive_to_end(node.pk, "off", timeout_s=20) == "off"
    assert _chassis(ipmi_bmc) == "off"
    services.power_on(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    assert drive_to_end(node.pk, "on", timeout_s=20) == "on"
    assert _chassis(ipmi_bmc) == "on"
    assert [e.to_state for e in PowerEvent.objects.filter(node=node).order_by("at", "pk")] == [
        "powering-off",
        "off",
        "powering-on",
        "on",
    ]


def test_ipmi_wrong_password_is_a_failure(ipmi_bmc):
    fabric = make_fabric("ipmi2", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    node = Node.objects.filter(fabric=fabric).order_by("pk").first()
    data = {"driver": "ipmi", "address": ipmi_bmc.address, "username": "admin", "password": "wrong"}
    services.set_bmc(node.pk, actor=SYSTEM_ACTOR, data=data)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    assert drive_to_end(node.pk, "off", timeout_s=5) == "failed"
    assert _chassis(ipmi_bmc) == "on"
