"""The collector's side of an agent fabric: the topology, the counters, the forwarding tables and
the routing check, each read by the fabric's agent on its SM host (:mod:`console.telemetry.agent_ops`).
The collector needs no HCA and no infiniband-diags for such a fabric."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from console.fabric.agents import rpc
from console.fabric.diags.topology import Topology, parse_topology
from console.fabric.drivers.base import DriverError
from console.fabric.models import Fabric
from console.telemetry.agent_ops import decode_sweep
from console.telemetry.core import PortReading
from console.telemetry.readers import PortKey, ReaderError

#: a sweep's read through the agent may take this long (the MAD read itself: ~0.1 s for 6,144 ports)
READ_TIMEOUT_S = 20.0


def _call(fabric: Fabric, op: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
    try:
        return rpc.call(fabric, op, payload, timeout=timeout)
    except (rpc.AgentLost, DriverError) as exc:
        raise ReaderError(f"{op} through the agent of {fabric.name}: {exc}") from exc


def topology(fabric: Fabric) -> Topology:
    """``ibnetdiscover`` on the fabric's SM host."""
    return parse_topology(str(_call(fabric, "topology", {}, 90)["stdout"]))


def routing(fabric: Fabric) -> dict[str, Any]:
    """The routing check on the SM host: configured, in use, fallback, and the log's mark."""
    return _call(fabric, "routing", {}, 10)


def _by_switch(keys: Collection[PortKey]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for sw, port in keys:
        out.setdefault(sw, []).append(port)
    return out


class AgentReader:
    """A :class:`~console.telemetry.readers.CounterReader` whose reads the agent makes."""

    #: one request per sweep: the agent's reader streams the fabric's switches itself
    partial_reads = False

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.last: dict[str, Any] = {}
        self._fresh = True
        self.held: dict[PortKey, tuple[dict[str, int], str]] = {}  # errors and state last received

    def read(
        self,
        ports: Mapping[str, list[int]],
        lids: Mapping[str, int],
        *,
        state: Collection[PortKey] | None = None,
    ) -> dict[PortKey, PortReading]:
        switches = list(ports)
        fresh = self._fresh
        payload = {
            "ports": {sw: list(p) for sw, p in ports.items()},
            "lids": dict(lids),
            "state": None if state is None else _by_switch(state),
            "fresh": fresh,
        }
        self._fresh = True  # until this read is done: a failed one makes the agent send everything again
        answer = _call(self.fabric, "read_counters", payload, READ_TIMEOUT_S)
        if fresh:
            self.held.clear()
        readings = decode_sweep(str(answer["sweep"]), switches, self.held)
        self._fresh = False
        self.last = dict(answer.get("last") or {})
        return readings

    def lft(self, lid: int, top: int) -> list[int] | None:
        table = _call(self.fabric, "lft", {"lid": lid, "top": top}, 10).get("table")
        return [int(v) for v in table] if isinstance(table, list) else None

    def close(self) -> None:
        return None
