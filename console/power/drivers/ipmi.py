"""IPMI over LAN (IPMI 2.0, RMCP+ ``lanplus``) through ``ipmitool``: chassis power on, soft
(ACPI shutdown), off, status. The password reaches ipmitool through its environment (``-E``),
never its command line (which any local user can read in the process list), and the frame that
holds it is marked ``sensitive_variables`` (Django's error reports star it).

(pyghmi's client was tried first: its 1.6.19 session asks for the SHA-256 cipher suite and
cannot fall back when a BMC answers with SHA-1, as pyghmi's own BMC server does.)"""

from __future__ import annotations

import os
import subprocess

from django.views.decorators.debug import sensitive_variables

from console.power.drivers.base import BmcError
from console.power.models import Bmc

DEFAULT_PORT = 623
TIMEOUT_S = 15


class IpmiDriver:
    """One chassis behind an IPMI BMC (``address``: host or host:port)."""

    def __init__(self, bmc: Bmc) -> None:
        self.bmc = bmc
        host, sep, port = bmc.address.rpartition(":")
        self.host, self.port = (host, int(port)) if sep and port.isdigit() else (bmc.address, DEFAULT_PORT)

    @sensitive_variables("env")  # the password: starred in Django's error reports of this frame
    def _run(self, *args: str) -> str:
        argv = ["ipmitool", "-I", "lanplus", "-H", self.host, "-p", str(self.port), "-U", self.bmc.username, "-E"]
        env = {**os.environ, "IPMI_PASSWORD": self.bmc.password}
        try:
            done = subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            # not chained: the frames of subprocess hold ``env`` (the password) as their locals
            raise BmcError(f"IPMI {' '.join(args)} on {self.bmc.address}: {exc}") from None
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()
            raise BmcError(f"IPMI {' '.join(args)} on {self.bmc.address}: {why[-1] if why else done.returncode}")
        return done.stdout

    def power_on(self) -> None:
        self._run("chassis", "power", "on")

    def graceful_off(self) -> None:
        self._run("chassis", "power", "soft")

    def force_off(self) -> None:
        self._run("chassis", "power", "off")

    def status(self) -> str:
        # "Chassis Power is on"
        return self._run("chassis", "power", "status").strip().rsplit(" ", 1)[-1].lower()
