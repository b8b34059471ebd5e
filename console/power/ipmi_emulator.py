"""An IPMI BMC for the tests and the lab: pyghmi's ``Bmc`` server class (real IPMI 2.0 over LAN,
RMCP+ sessions) with a chassis whose power changes ``delay_s`` after a command, as a host does.

Run it as a process: ``python -m console.power.ipmi_emulator --port 9623 --user admin
--password secret [--delay 1.5] [--state on]``; :func:`start` does that and waits for it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from pyghmi.ipmi import bmc as pyghmi_bmc

from console.power.emulator import stop_group


class ChassisBmc(pyghmi_bmc.Bmc):
    """A chassis that powers on, shuts down (gracefully, after ``delay_s``) or goes off at once."""

    def __init__(self, authdata: dict[str, str], port: int, state: str, delay_s: float) -> None:
        super().__init__(authdata, port=port, address="127.0.0.1")
        self.state, self.delay_s = state, delay_s
        self._timer: threading.Timer | None = None

    def _later(self, state: str) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(self.delay_s, lambda: setattr(self, "state", state))
        self._timer.daemon = True
        self._timer.start()

    def get_power_state(self) -> str:
        return self.state

    def power_on(self) -> None:
        self._later("on")

    def power_shutdown(self) -> None:
        self._later("off")

    def power_off(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.state = "off"


@dataclass
class IpmiEmulator:
    """A running emulator process: ``host:port`` and credentials; :meth:`stop` ends it."""

    address: str
    username: str
    password: str
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        """Terminate the emulator and wait for it."""
        stop_group(self.process)


def start(port: int, username: str, password: str, *, delay_s: float = 1.5, timeout: float = 20.0) -> IpmiEmulator:
    """Start the emulator on 127.0.0.1:``port`` (UDP) and wait until it answers a power query."""
    argv = [sys.executable, "-m", "console.power.ipmi_emulator", "--port", str(port), "--user", username]
    argv += ["--password", password, "--delay", str(delay_s)]
    process = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    emulator = IpmiEmulator(f"127.0.0.1:{port}", username, password, process)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the IPMI emulator exited ({process.returncode})")
        if chassis_power(emulator) in ("on", "off"):
            return emulator
        time.sleep(0.2)
    emulator.stop()
    raise RuntimeError(f"the IPMI emulator did not answer on 127.0.0.1:{port}")


def chassis_power(emulator: IpmiEmulator) -> str | None:
    """The chassis power as ``ipmitool chassis power status`` reads it (None: no answer)."""
    host, port = emulator.address.split(":")
    argv = ["ipmitool", "-I", "lanplus", "-H", host, "-p", port, "-U", emulator.username, "-E"]
    env = {**os.environ, "IPMI_PASSWORD": emulator.password}
    try:
        done = subprocess.run(
            [*argv, "chassis", "power", "status"], env=env, capture_output=True, text=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        return None
    return done.stdout.strip().rsplit(" ", 1)[-1].lower() if done.returncode == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--delay", type=float, default=1.5)
    parser.add_argument("--state", choices=["on", "off"], default="on")
    args = parser.parse_args()
    ChassisBmc({args.user: args.password}, args.port, args.state, args.delay).listen()


if __name__ == "__main__":
    main()
