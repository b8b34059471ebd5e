"""Power tests run a real Redfish BMC: OpenStack's sushy-emulator (fake driver), one per module,
with a pool of systems handed out one per node so tests never share a system's power state."""

from __future__ import annotations

import datetime as dt
import itertools
import time
from pathlib import Path

import pytest
import requests

from console.power import emulator as bmc_emulator
from console.power import services
from console.power.models import Bmc
from console.tenancy.context import Actor
from console.tenancy.models import Tenant
from scheduling.models import Node, Reservation
from scheduling.services.reservations import reserve
from tests.scheduling.conftest import give_quota, make_pool, request_for, tenant_principal

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


def drive_to_end(node_id: int, action: str, *, timeout_s: float | None = None, seconds: float = 60.0) -> str:
    """What the worker does, in this process: ``power.drive``, then each ``power.poll`` it
    re-queues (at once instead of after the countdown) until one settles the node; fails the
    test if none did within ``seconds``."""
    polls: list[tuple[int, str, float]] = []

    def requeue(node: int, act: str, deadline: float) -> None:
        polls.append((node, act, deadline))

    state = services.drive(node_id, action, timeout_s=timeout_s, requeue=requeue)
    until = time.monotonic() + seconds
    while polls:
        assert time.monotonic() < until, f"node {node_id} still {state} after {seconds} s"
        time.sleep(0.2)
        state = services.poll(*polls.pop(), requeue=requeue)
    return state


def reserve_node(node: Node, start: dt.datetime) -> Reservation:
    """A reservation of ``node`` (alone in a pool of its own) from ``start``, for two hours."""
    tenant = Tenant.objects.create(name=f"Needs {node.pk}", slug=f"needs-{node.pk}")
    pool = make_pool(node.fabric, f"one-{node.pk}", nodes=[node])
    give_quota(tenant, pool, 8)
    reservation = reserve(SYSTEM_ACTOR, tenant_principal(tenant), request_for(pool, gpus=8, start=start))
    assert reservation.status in Reservation.HOLDING, reservation.reason
    return reservation
