"""Small helpers the benchmark scripts share (percentiles, host load, ports, CPU time of a process)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any


def pct(values: list[float], q: float) -> float:
    """The ``q``-th percentile by nearest rank (NaN for no values)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def load_average() -> float:
    """The host's 1-minute load average (the machine is shared: every figure is quoted with it)."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def imported_fabric(name: str, gpus: int) -> tuple[Any, list[Any]]:
    """A saved rail-optimised design of ``gpus`` GPUs bound to a new fabric ``name`` and imported
    (Django set up, a test database in use): the fabric and its nodes in primary-key order."""
    from console.fabric.models import Fabric
    from console.tenancy.context import Actor
    from console.tenancy.models import Principal, Role
    from designer import services as designer_services
    from scheduling.models import Node
    from scheduling.services import inventory

    operator = Principal(None, Role.OPERATOR, None)
    options = {"topology": "rail-optimized", "gpus": gpus}
    _, revision = designer_services.create_design(Actor.system("bench"), operator, name=name, options=options)
    fabric = Fabric.objects.create(name=name, revision=revision)
    inventory.import_inventory(fabric)
    return fabric, list(Node.objects.filter(fabric=fabric).order_by("pk"))
