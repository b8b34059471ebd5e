"""End to end against the lab: real OpenSM on ibsim, the collector process, uvicorn (ASGI, for
the sockets), Redis, PostgreSQL and Debian's Chromium.

Unplug a cable in ibsim → within 5 s the operator's page shows the link down and the link-down
event; replug → it clears. A ready reservation (made through scheduling's services) shows
utilisation in its tenant's view, and nothing of the other tenant's.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from console.fabric import labs
from scheduling.services import inventory
from tests.fabric.conftest import requires_lab
from tests.live.helpers import ready_reservation

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.e2e, pytest.mark.timeout(300),
              pytest.mark.django_db(transaction=True)]  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(data_dir: Path) -> dict[str, str]:
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env["DATABASE_URL"] = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env["CONSOLE_DATA_DIR"] = str(data_dir)
    env["DJANGO_ALLOW_ASYNC_UNSAFE"] = ""
    return env


@pytest.fixture
def processes(lab_data_dir):
    started: list[subprocess.Popen] = []
    lab_data_dir.mkdir(parents=True, exist_ok=True)

    def start(*argv: str) -> subprocess.Popen:
        log = open(lab_data_dir / f"{argv[0].replace('.', '_')}-{len(started)}.log", "wb")
        proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=_env(lab_data_dir),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _wait_http(url: str, timeout: float = 30) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("uvicorn did not come up")


def web(processes) -> str:
    """uvicorn on a free port; the console's URL once it answers."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    processes("-m", "uvicorn", "console.asgi:application", "--host", "127.0.0.1", "--port",
              str(port), "--lifespan", "off", "--log-level", "warning")  # fmt: skip
    _wait_http(url)
    return url


def serve(processes, fabric) -> str:
    """:func:`web` and the fabric's collector (0.5 s sweeps); the console's URL."""
    processes("manage.py", "collector", "--fabric", str(fabric.pk), "--interval", "0.5")
    return web(processes)


def _login(browser, url: str, username: str):
    page = browser.new_context().new_page()
    page.goto(f"{url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-12345678")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{url}/")
    return page


def test_unplugged_cable_shows_down_within_5s_and_clears_and_tenants_see_their_traffic(
    orm_beside_playwright,
    lab_fabric,
    processes,
    browser,
    operator,
    admin_a,
    admin_b,
    tenant_a,
    tenant_b,
):
    fabric, _lab = lab_fabric("live")
    inventory.import_inventory(fabric)
    res_a = ready_reservation(fabric, tenant_a, nodes=2)
    ready_reservation(fabric, tenant_b, nodes=2)
    url = serve(processes, fabric)

    op = _login(browser, url, "op")
    op.goto(f"{url}/fabrics/{fabric.pk}/live/")
    expect(op.get_by_test_id("live-conn")).to_have_text("live", timeout=15_000)
    expect(op.get_by_test_id("live-summary")).to_contain_text("collector running", timeout=15_000)

    # the tenant's page: its reservation's links carry the traffic model's all-reduce
    tenant = _login(browser, url, "admin-a")
    tenant.goto(f"{url}/live/")
    expect(tenant.get_by_test_id("live-title")).to_contain_text(fabric.name)
    tenant.wait_for_function(
        "() => window.__live && [...window.__live.links.values()].some(l => l.util > 0.3)",
        timeout=20_000,
    )
    ids = tenant.evaluate("() => [...window.__live.links.keys()]")
    assert len(ids) == 16  # 2 nodes × 8 rails, nothing of tenant B's
    node = sorted(fabric.nodes.filter(pk__in=res_a.allocations.values("node")).values_list(
        "name", flat=True))[0]  # fmt: skip
    leaf, leaf_port = fabric.nodes.get(name=node).hcas.values_list("leaf", "leaf_port").first()
    link = f"{leaf}/{leaf_port}"
    assert link in ids

    # when a cable of that reservation is pulled in ibsim
    started = time.monotonic()
    labs.unplug(fabric, leaf, leaf_port)
    op.locator(f'[data-testid=down-link][data-link="{link}"]').wait_for(timeout=5_000)
    op.locator(f'[data-testid=event][data-kind=link_down][data-subject="{link}"]').wait_for(
        timeout=5_000
    )
    assert time.monotonic() - started < 5.0
    # the tenant sees it too, on its own link
    tenant.locator(f'[data-testid=down-link][data-link="{link}"]').wait_for(timeout=5_000)
    expect(tenant.locator(f'[data-testid=event][data-subject="{link}"]')).to_contain_text(
        str(res_a.pk)
    )

    # when it is put back, the link is up again and the event resolves itself
    labs.replug(fabric, leaf, leaf_port)
    expect(op.locator(f'[data-testid=down-link][data-link="{link}"]')).to_have_count(0,
                                                                                      timeout=15_000)  # fmt: skip
    expect(op.locator(f'[data-testid=event][data-subject="{link}"]')).to_have_attribute(
        "data-status", "resolved", timeout=15_000
    )
