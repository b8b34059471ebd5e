"""The demo: `demo seed` gives every demo node a Redfish BMC at the emulator `manage.py up`
starts (console.power.emulator.start_demo), and a demo node can be powered off through it."""

from __future__ import annotations

import socket

import pytest
from django.utils import timezone

from console.power import emulator, services
from console.power.models import Bmc
from scheduling.models import Node
from tests.power.conftest import SYSTEM_ACTOR, drive_to_end, emulator_power

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_port(monkeypatch) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("CONSOLE_BMC_EMULATOR_PORT", str(port))
    return port


def test_demo_nodes_have_bmcs_at_the_demo_emulator(demo_port, tmp_path):
    from console.demo import seed_all

    # given the demo seed
    seed_all()
    nodes = Node.objects.filter(fabric__revision__design__name="superpod-su1")
    assert nodes.count() == 32
    assert Bmc.objects.filter(node__in=nodes, address=f"http://127.0.0.1:{demo_port}").count() == 32
    # when `manage.py up` starts the demo emulator
    running = emulator.start_demo(tmp_path / "bmc-emulator")
    assert running is not None
    try:
        assert len(running.systems) == 32
        # then an idle demo node powers off through its BMC
        idle = next(n for n in nodes.order_by("pk") if not services.needing_reservations(n, timezone.now()))
        services.power_off(idle.pk, actor=SYSTEM_ACTOR, reason="demo", enqueue=False)
        assert drive_to_end(idle.pk, "off") == "off"
        assert emulator_power(running, Bmc.objects.get(node=idle)) == "Off"
    finally:
        running.stop()
    # and the seed stays idempotent
    assert not [line for line in seed_all() if "BMC" in line]
