"""Where a discovery's inputs come from: the fabric's agent on its subnet-manager host, or (a lab
without an agent, an ``opensm`` fabric whose SM runs on the worker's own host) this host.

A sweep is three readings taken on the SM host, in this order: a mark in OpenSM's log (so a
later compare can tell whether OpenSM swept since), ``ibnetdiscover``'s text, and the routing
engine OpenSM really used (from the same log: the SM never says it on the wire). The agent takes
all three in one request (op ``discover``) and answers whether OpenSM swept since a mark (op
``swept_since``); the local source reads them here. Neither the web tier nor a central worker
runs infiniband-diags for an agent's fabric.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from console.fabric.agents import rpc
from console.fabric.diags.runner import DiagError, DiagRunner
from console.fabric.drivers import driver_for
from console.fabric.drivers.base import DriverError, Progress, no_progress
from console.fabric.drivers.hosts import OpenSmHost
from console.fabric.lab.routing import log_mark, routing_of, swept_since
from console.fabric.models import Fabric
from console.tenancy.errors import ConsoleError, Invalid

#: ibnetdiscover of a 2,048-HCA lab takes ~0.25 s; a real fabric of that size a few seconds.
DISCOVERY_TIMEOUT = 60.0
NO_ROUTING: dict[str, Any] = {"configured": None, "in_use": None, "fallback": False, "evidence": []}


class DiscoveryFailed(ConsoleError):
    """ibnetdiscover failed, timed out, or printed something the parser refuses."""

    status = 502
    code = "discovery_failed"


@dataclass(frozen=True)
class Sweep:
    """What one sweep read on the SM host."""

    stdout: str
    sm_mark: int | None  # OpenSM's log mark taken before ibnetdiscover (None: no log readable)
    routing: dict[str, Any]  # configured vs in-use routing engine, fallback, evidence


class SweepSource(Protocol):
    """Reads a fabric's topology and OpenSM's log where they can be read."""

    def sweep(self, progress: Progress = no_progress) -> Sweep: ...

    def swept_since(self, mark: int) -> bool | None:
        """OpenSM ended a heavy sweep after ``mark`` (None: cannot tell)."""
        ...


def read_sweep(diags: DiagRunner, log: Path | None, engine: str, progress: Progress = no_progress) -> Sweep:
    """The three readings on the host that has the HCA and OpenSM's log (the agent's and the
    local source's common core)."""
    mark = log_mark(log) if log is not None else None  # before: a SUBNET UP after it may postdate us
    progress("ibnetdiscover", "running")
    try:
        stdout = diags.run("ibnetdiscover").stdout
    except DiagError as exc:
        raise DriverError(f"ibnetdiscover failed: {exc}") from exc
    progress("routing check", "running")
    if log is None:
        routing = {**NO_ROUTING, "evidence": ["no OpenSM log readable on the SM host (config opensm_log)"]}
    else:
        routing = routing_of(log, engine)
    return Sweep(stdout, mark, routing)


def log_swept_since(log: Path | None, mark: int) -> bool | None:
    """:func:`swept_since` of a log that may not be readable."""
    return swept_since(log, mark) if log is not None else None


def local_host(fabric: Fabric) -> OpenSmHost:
    """The SM host of a fabric read on this machine: an ``opensm`` fabric's OpenSM here (the
    collector reads through the same). A lab's SM host is reached through its agent."""
    if fabric.driver == Fabric.Driver.OPENSM:
        host: OpenSmHost = driver_for(fabric).host  # type: ignore[attr-defined]
        return host
    raise Invalid(f"discovery through the {fabric.driver} driver is not supported yet")


class LocalSource:
    """This host's HCA and OpenSM log (an ``opensm`` fabric)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric

    def sweep(self, progress: Progress = no_progress) -> Sweep:
        host = local_host(self.fabric)
        try:
            return read_sweep(host.diags(timeout=DISCOVERY_TIMEOUT), *host.sm_log(), progress)
        except DriverError as exc:
            raise DiscoveryFailed(f"{exc} on {self.fabric.name}") from exc

    def swept_since(self, mark: int) -> bool | None:
        try:
            host = local_host(self.fabric)
        except (DriverError, Invalid):  # (a driver with no SM host here: cannot tell)
            return None
        return log_swept_since(host.sm_log()[0], mark)


class AgentSource:
    """The fabric's agent reads on its SM host (ops ``discover`` and ``swept_since``)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric

    def sweep(self, progress: Progress = no_progress) -> Sweep:
        try:
            answer = rpc.call(self.fabric, "discover", {}, timeout=DISCOVERY_TIMEOUT + 30, progress=progress)
        except (rpc.AgentLost, DriverError) as exc:
            raise DiscoveryFailed(f"discovery of {self.fabric.name}: {exc}") from exc
        mark = answer.get("sm_mark")
        return Sweep(str(answer["stdout"]), mark if isinstance(mark, int) else None, dict(answer["routing"]))

    def swept_since(self, mark: int) -> bool | None:
        try:
            swept = rpc.call(self.fabric, "swept_since", {"mark": mark}, timeout=5)["swept"]
        except (rpc.AgentLost, DriverError):
            return None  # the agent is not there: only the age counts, and the answer says so
        return swept if isinstance(swept, bool) else None


def source_for(fabric: Fabric) -> SweepSource:
    """The fabric's agent when it has one, else this host."""
    if fabric.through_agent:
        return AgentSource(fabric)
    return LocalSource(fabric)
