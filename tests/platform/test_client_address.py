"""The client's address the console counts (lockouts, throttles) is the peer's, or the entry a
trusted proxy wrote (``CONSOLE_TRUSTED_PROXIES``), in every server the console starts: a local
client's own ``X-Forwarded-For`` is not believed. uvicorn believes it from 127.0.0.1 by default.

The server is a real uvicorn started with ``manage.py up``'s own command line; the address it
counted is read from the throttle's counters in Redis (shared with this process)."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

import pytest
from django.core.cache import caches

from console.management.commands.up import web_command
from tests import servers
from tests.platform.test_deploy_files import UNITS, exec_start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.needs("postgresql")]


def test_ups_web_server_counts_the_peer_not_a_forwarded_for_the_client_wrote(tmp_path):
    throttle = caches["throttle"]
    for ident in ("127.0.0.1", "203.0.113.9"):
        throttle.delete(f"throttle_anon_{ident}")
    port = servers._free_port()
    started: list = []
    start = servers.spawner(tmp_path, started)
    try:
        start(*web_command(sys.executable, "127.0.0.1", port)[1:])
        url = f"http://127.0.0.1:{port}"
        servers._wait_http(url, "uvicorn")
        request = urllib.request.Request(f"{url}/api/pools/", headers={"X-Forwarded-For": "203.0.113.9"})
        with pytest.raises(urllib.error.HTTPError) as refused:  # anonymous: 401, counted first
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code in (401, 403)
    finally:
        servers.stop_all(started)
    assert throttle.get("throttle_anon_203.0.113.9") is None
    assert throttle.get("throttle_anon_127.0.0.1")


def test_every_asgi_unit_leaves_the_forwarded_headers_to_the_console():
    asgi = [exec_start(unit) for unit in UNITS if "uvicorn" in exec_start(unit)[0]]
    assert asgi  # (ibconsole-asgi.service)
    assert all("--no-proxy-headers" in argv for argv in asgi)
