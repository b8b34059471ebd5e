"""The Redfish BMC emulator of OpenStack's sushy-tools, run for the demo and the tests.

``sushy-emulator`` with its fake driver serves one ComputerSystem per node (named after the
node, a UUID derived from the name so restarts keep identities), behind HTTP basic auth (a
bcrypt htpasswd file, as the emulator requires). Its power transitions are not instant: a reset
takes effect 1 to 11 seconds later (the driver's ``pending_power``), which is what the console's
powering-on/-off states and their polling are for. State lives in the data directory's SQLite
file, never in the emulator's shared default under /tmp.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt
import requests

DEFAULT_USERNAME = "admin"
#: a throwaway credential for the local emulator only (the demo's BMCs store it encrypted like any)
DEFAULT_PASSWORD = "emulated-bmc"
#: where `manage.py up` serves the demo's BMCs (CONSOLE_BMC_EMULATOR_PORT overrides)
DEMO_PORT = 8623
_NAMESPACE = uuid.UUID("6f1c2a52-7a43-4f0e-9a55-2b8d1e0c6c11")


def demo_port() -> int:
    """The demo emulator's port."""
    return int(os.environ.get("CONSOLE_BMC_EMULATOR_PORT", DEMO_PORT))


def demo_url() -> str:
    """The demo emulator's base URL (what the demo nodes' BMCs point at)."""
    return f"http://127.0.0.1:{demo_port()}"


def system_uuid(name: str) -> str:
    """The emulated system's stable UUID for node ``name``."""
    return str(uuid.uuid5(_NAMESPACE, name))


def system_path(name: str) -> str:
    """The Redfish path of node ``name``'s system (what :class:`~console.power.models.Bmc` stores)."""
    return f"/redfish/v1/Systems/{system_uuid(name)}"


class EmulatorError(RuntimeError):
    """The emulator did not start or answer."""


@dataclass
class Emulator:
    """A running sushy-emulator: its base URL and credentials; :meth:`stop` ends it."""

    url: str
    username: str
    password: str
    process: subprocess.Popen[bytes]
    directory: Path
    systems: dict[str, str] = field(default_factory=dict)  # node name → Redfish system path

    def stop(self) -> None:
        """Terminate the emulator and wait for it."""
        stop_group(self.process)


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """End the process group a launcher here started (``start_new_session``): TERM, then KILL."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _serves(reply: requests.Response, emulator: Emulator) -> bool:
    """Whether the answer lists every system of ``emulator`` (ours, not another server's)."""
    members = {m.get("@odata.id", "").rstrip("/") for m in reply.json().get("Members", [])}
    return set(emulator.systems.values()) <= members


def _config(directory: Path, nodes: Iterable[str], power_state: str) -> str:
    systems = [
        {"uuid": system_uuid(name), "name": name, "power_state": power_state, "external_notifier": False, "nics": []}
        for name in nodes
    ]
    return (
        "SUSHY_EMULATOR_FAKE_DRIVER = True\n"
        f"SUSHY_EMULATOR_FAKE_SYSTEMS = {systems!r}\n"
        f"SUSHY_EMULATOR_STATE_DIR = {str(directory / 'state')!r}\n"
        f"SUSHY_EMULATOR_AUTH_FILE = {str(directory / 'htpasswd')!r}\n"
        "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\n"
    )


def start(
    directory: Path,
    nodes: Iterable[str],
    *,
    port: int = 0,
    power_state: str = "On",
    username: str = DEFAULT_USERNAME,
    password: str = DEFAULT_PASSWORD,
    fresh: bool = True,
    timeout: float = 30.0,
) -> Emulator:
    """Start sushy-emulator on loopback (``port`` 0: a free one) with one system per node name,
    all ``power_state`` at first; returns once it answers an authenticated request. ``fresh``
    wipes the state left by an earlier run in ``directory``."""
    names = list(nodes)
    directory.mkdir(parents=True, exist_ok=True)
    if fresh:
        shutil.rmtree(directory / "state", ignore_errors=True)
    digest = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    (directory / "htpasswd").write_text(f"{username}:{digest}\n")
    config = directory / "emulator.conf"
    config.write_text(_config(directory, names, power_state))
    if port and not _port_free(port):
        raise EmulatorError(
            f"port {port} on 127.0.0.1 is taken by another process: the emulator would not be the one "
            "answering there (stop that process, or set CONSOLE_BMC_EMULATOR_PORT and seed the demo again)"
        )
    port = port or _free_port()
    executable = Path(sys.executable).with_name("sushy-emulator")
    log = open(directory / "emulator.log", "ab")
    process = subprocess.Popen(
        [str(executable), "--config", str(config), "--port", str(port), "--interface", "127.0.0.1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    emulator = Emulator(
        f"http://127.0.0.1:{port}", username, password, process, directory, {n: system_path(n) for n in names}
    )
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise EmulatorError(f"sushy-emulator exited ({process.returncode}); see {directory / 'emulator.log'}")
        try:
            reply = requests.get(f"{emulator.url}/redfish/v1/Systems", auth=(username, password), timeout=2)
            if reply.status_code == 200 and _serves(reply, emulator) and process.poll() is None:
                return emulator
        except (requests.ConnectionError, ValueError):
            pass
        if time.monotonic() > deadline:
            emulator.stop()
            raise EmulatorError(f"sushy-emulator did not answer on {emulator.url} within {timeout:.0f} s")
        time.sleep(0.1)


def start_demo(directory: Path) -> Emulator | None:
    """The emulator behind the demo's BMCs (those whose address is :func:`demo_url`), one system
    per such node, its power states kept in ``directory`` across restarts; None without any."""
    from scheduling.models import Node

    names = list(Node.objects.filter(bmc__address=demo_url()).order_by("pk").values_list("name", flat=True))
    if not names:
        return None
    return start(directory, names, port=demo_port(), fresh=False)
