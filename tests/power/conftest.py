"""Power tests run a real Redfish BMC: OpenStack's sushy-emulator (fake driver), one per module,
with a pool of systems handed out one per node so tests never share a system's power state."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import requests

from console.power import emulator as bmc_emulator
from console.power import services
from console.power.models import Bmc
from console.tenancy.context import Actor
from scheduling.models import Node

SYSTEMS = 48
SYSTEM_ACTOR = Actor.system("tests")


@pytest.fixture(scope="module")
def redfish(tmp_path_factory):
    """A running sushy-emulator with :data:`SYSTEMS` systems, all on."""
    directory: Path = tmp_path_factory.mktemp("sushy")
    emu = bmc_emulator.start(directory, [f"sys-{i:02d}" for i in range(SYSTEMS)])
    emu.free = itertools.count()  # type: ignore[attr-defined]
    yield emu
    emu.stop()


@pytest.fixture
def attach_bmc(redfish):
    """``attach_bmc(node)``: give ``node`` an unused emulated system as its BMC; returns the Bmc."""

    def attach(node: Node, **overrides) -> Bmc:
        name = f"sys-{next(redfish.free):02d}"
        data = {
            "driver": "redfish",
            "address": redfish.url,
            "username": redfish.username,
            "password": redfish.password,
            "system_id": redfish.systems[name],
            "verify_tls": False,
        }
        data.update(overrides)
        return services.set_bmc(node.pk, actor=SYSTEM_ACTOR, data=data)

    return attach


def emulator_power(redfish, bmc: Bmc) -> str:
    """The system's PowerState as the emulator serves it, read with plain HTTP (not sushy)."""
    reply = requests.get(f"{redfish.url}{bmc.system_id}", auth=(redfish.username, redfish.password), timeout=5)
    reply.raise_for_status()
    return reply.json()["PowerState"]
