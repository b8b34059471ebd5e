"""The collector's side of an agent fabric: the topology, the counters, the forwarding tables and
the routing check, each read by the fabric's agent on its SM host (:mod:`console.telemetry.agent_ops`).
The collector needs no HCA and no infiniband-diags for such a fabric."""

from __future__ import annotations

import queue
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
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


def phy(fabric: Fabric, timeout: float = 60.0) -> dict[str, Any]:
    """The PHY readings recorded on the fabric's SM host (:func:`console.telemetry.agent_ops.phy_on`)."""
    return _call(fabric, "phy", {}, timeout)


def _by_switch(keys: Collection[PortKey]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for sw, port in keys:
        out.setdefault(sw, []).append(port)
    return out


class AgentReader:
    """A :class:`~console.telemetry.readers.CounterReader` whose reads the agent makes.

    A sweep in parts is one request: the agent streams each part's counters back as its MAD
    reader reads them (``part`` reports), so the collector publishes the first switches while
    the agent reads the rest, as it does with a local reader. The request runs on one thread of
    this reader's own (its channel layer is that thread's, kept from sweep to sweep); the parts
    come through a queue."""

    #: the collector may read in parts: the agent streams them
    partial_reads = True

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.last: dict[str, Any] = {}
        self._fresh = True
        self.held: dict[PortKey, tuple[dict[str, int], str]] = {}  # errors and state last received
        self._caller = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"agent-read-{fabric.pk}")

    def read(
        self,
        ports: Mapping[str, list[int]],
        lids: Mapping[str, int],
        *,
        state: Collection[PortKey] | None = None,
    ) -> dict[PortKey, PortReading]:
        return next(iter(self.read_parts([ports], lids, state=state)))

    def read_parts(
        self,
        parts: Sequence[Mapping[str, list[int]]],
        lids: Mapping[str, int],
        *,
        state: Collection[PortKey] | None = None,
    ) -> Iterator[dict[PortKey, PortReading]]:
        """Each part's readings, as the agent sends them."""
        fresh = self._fresh
        ports = {sw: list(p) for part in parts for sw, p in part.items()}
        payload = {
            "ports": ports,
            "parts": [list(part) for part in parts],
            "lids": dict(lids),
            "state": None if state is None else _by_switch(state),
            "fresh": fresh,
        }
        self._fresh = True  # until this read is done: a failed one makes the agent send everything again
        got: queue.SimpleQueue[dict[str, Any] | BaseException | None] = queue.SimpleQueue()
        try:
            agent = rpc.agent_for(self.fabric)  # (the database is asked here, not on the caller thread)
        except rpc.AgentLost as exc:
            raise ReaderError(f"read_counters through the agent of {self.fabric.name}: {exc}") from exc

        def ask() -> None:
            try:
                rpc.call(agent, "read_counters", payload, timeout=READ_TIMEOUT_S, on_part=got.put)
                got.put(None)
            except BaseException as exc:  # handed to the reading thread
                got.put(exc)

        self._caller.submit(ask)
        if fresh:
            self.held.clear()
        for part in parts:
            item = _next(got, self.fabric)
            if item is None:
                raise ReaderError(f"the agent of {self.fabric.name} sent fewer parts than asked")
            self.last = dict(item.get("last") or {})
            yield decode_sweep(str(item["sweep"]), list(part), self.held)
        if _next(got, self.fabric) is not None:
            raise ReaderError(f"the agent of {self.fabric.name} sent more parts than asked")
        self._fresh = False

    def lft(self, lid: int, top: int) -> list[int] | None:
        table = _call(self.fabric, "lft", {"lid": lid, "top": top}, 10).get("table")
        return [int(v) for v in table] if isinstance(table, list) else None

    def lfts(self, lids: Sequence[int], top: int) -> list[list[int] | None]:
        """Many switches' forwarding tables in one request (None: a switch that did not answer)."""
        timeout = 10 + 0.2 * len(lids)
        tables = _call(self.fabric, "lfts", {"lids": list(lids), "top": top}, timeout).get("tables") or []
        return [[int(v) for v in t] if isinstance(t, list) else None for t in tables]

    def close(self) -> None:
        self._caller.shutdown(wait=False, cancel_futures=True)


def _next(got: queue.SimpleQueue[dict[str, Any] | BaseException | None], fabric: Fabric) -> dict[str, Any] | None:
    """The next part (None: the request ended), or the request's error raised."""
    try:
        item = got.get(timeout=READ_TIMEOUT_S + rpc.ACCEPT_TIMEOUT_S + 5)
    except queue.Empty as exc:
        raise ReaderError(f"read_counters through the agent of {fabric.name}: no answer") from exc
    if isinstance(item, ReaderError):
        raise item
    if isinstance(item, BaseException):
        raise ReaderError(f"read_counters through the agent of {fabric.name}: {item}") from item
    return item
