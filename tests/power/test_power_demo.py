"""The demo: `demo seed` gives every demo node a Redfish BMC at the emulator `manage.py up`
starts (console.power.emulator.start_demo), and a demo node can be powered off through it."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest
import requests
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


def test_the_demo_emulator_refuses_a_port_another_server_answers_on(demo_port, tmp_path):
    from console.demo import seed_all

    seed_all()

    # given another HTTP server already listening on the demo emulator's port, answering 200
    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"Members": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    squatter = http.server.HTTPServer(("127.0.0.1", demo_port), Ok)
    threading.Thread(target=squatter.serve_forever, daemon=True).start()
    try:
        # when the console starts its emulator there, it refuses (naming the port), not adopting
        # the other server's 200 as its own
        with pytest.raises(emulator.EmulatorError, match=f"port {demo_port}.*taken by another process"):
            emulator.start_demo(tmp_path / "bmc-emulator")
    finally:
        squatter.shutdown()
        squatter.server_close()


def test_an_emulator_is_ready_only_when_it_lists_its_own_systems(tmp_path):
    running = emulator.start(tmp_path / "e", ["n1", "n2"])
    try:
        reply = requests.get(f"{running.url}/redfish/v1/Systems", auth=(running.username, running.password), timeout=5)
        assert emulator._serves(reply, running)
        other = emulator.Emulator(running.url, "", "", running.process, tmp_path, {"x": emulator.system_path("x")})
        assert not emulator._serves(reply, other)
    finally:
        running.stop()
