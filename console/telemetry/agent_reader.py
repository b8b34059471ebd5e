"""The collector's side of an agent fabric: the topology, the counters, the forwarding tables and
the routing check, each read by the fabric's agent on its SM host (:mod:`console.telemetry.agent_ops`).
The collector needs no HCA and no infiniband-diags for such a fabric.

The counters come the fast way where the SM host runs the MAD helper: the collector's own
:class:`~console.telemetry.readers.MadReader` plans each sweep and reads the helper's answers,
which the agent relays unparsed (:class:`RemoteMadSession`), so every port's reading is built
once, here, as it is for a fabric read locally. Where the helper cannot run on the SM host, the
agent reads with perfquery and sends readings (:class:`AgentReader`)."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from console.fabric.agents import rpc
from console.fabric.diags.mad import MadError, MadUnavailable
from console.fabric.diags.topology import Topology, parse_topology
from console.fabric.drivers.base import DriverError
from console.fabric.models import Fabric, FabricAgent
from console.telemetry.agent_ops import NO_HELPER, decode_sweep, pack, unpack
from console.telemetry.core import PortReading
from console.telemetry.readers import CounterReader, MadReader, PortKey, ReaderError

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


def open_reader(
    fabric: Fabric, *, mode: str | None = None, window: int | None = None, error_sums: bool = True
) -> CounterReader:
    """The counter reader of an agent fabric: the collector's MAD reader over the SM host's
    helper (:class:`RemoteMadSession`), else (no helper there) :class:`AgentReader`."""
    reader = MadReader(
        None,  # (no diag environment here: the helper is the agent's)
        session=RemoteMadSession(fabric, mode=mode, window=window),
        error_sums=error_sums,
        sums_ahead=True,
    )
    try:
        reader._start()
    except ReaderError as exc:
        reader.close()
        if NO_HELPER not in str(exc):
            raise
        return AgentReader(fabric)
    return reader


class RemoteMadSession:
    """:class:`~console.fabric.diags.mad.MadSession`'s ``stream`` over the fabric's agent: the
    requests of a stream go in one ``mad`` request (planned at once: a reader plans each part
    from what it holds, not from the answers to the parts before it), and each of the helper's
    answers comes back as the agent relays it; the caller reads answer k while the helper reads
    k+1. The requests go from a thread of this session's own, with one event loop and one set
    of broker connections for its whole life (:class:`~console.fabric.agents.rpc.Caller`); the
    answers come through a queue."""

    #: how long the agent chosen for the fabric is asked again before a stream (a failover moves it)
    AGENT_TTL_S = 5.0

    def __init__(self, fabric: Fabric, *, timeout: float = 10.0, mode: str | None = None, window: int | None = None):
        self.fabric = fabric
        self.timeout = timeout
        self.options = {k: v for k, v in (("mode", mode), ("window", window)) if v is not None}
        self.last_stats: dict[str, Any] = {}
        self._caller = rpc.Caller(f"agent-mad-{fabric.pk}")
        self._agent: tuple[FabricAgent, float] | None = None

    def start(self) -> None:
        """Ask the SM host's helper to answer (:class:`MadUnavailable` when it cannot run there)."""
        try:
            list(self.stream([{"op": "ping"}]))
        except MadError as exc:
            raise MadUnavailable(str(exc)) from exc

    def request(self, request: dict[str, Any], *, timeout: float | None = None) -> Any:
        return list(self.stream([request], timeout=timeout))[0]

    def _agent_now(self) -> FabricAgent:
        now = time.monotonic()
        if self._agent is None or now - self._agent[1] > self.AGENT_TTL_S:
            try:
                self._agent = (rpc.agent_for(self.fabric), now)
            except rpc.AgentLost as exc:
                raise MadError(f"the agent of {self.fabric.name}: {exc}") from exc
        return self._agent[0]

    def stream(
        self, requests: Iterable[dict[str, Any]], *, timeout: float | None = None, depth: int = 2
    ) -> Iterator[Any]:
        # each request as the helper's JSON line: the agent writes them to its helper unparsed
        batch = [json.dumps({**self.options, **r}, separators=(",", ":")).encode() for r in requests]
        if not batch:
            return
        per_answer = timeout if timeout is not None else self.timeout
        wait = per_answer + rpc.ACCEPT_TIMEOUT_S + 5
        got: queue.SimpleQueue[dict[str, Any] | BaseException | None] = queue.SimpleQueue()
        payload = {"requests": pack(b"\n".join(batch)), "timeout": per_answer}
        try:
            future = self._caller.ask(
                self._agent_now(), "mad", payload, timeout=per_answer * len(batch) + 5, on_part=got.put
            )
            future.add_done_callback(lambda f: got.put(f.exception() or None))
            for _ in batch:
                pieces: list[str] = []
                while True:
                    item = _next(got, self.fabric, wait, MadError)
                    if item is None:
                        raise MadError(f"the agent of {self.fabric.name} relayed fewer answers than asked")
                    pieces.append(str(item["line"]))
                    if not item.get("more"):
                        break
                reply = json.loads(unpack("".join(pieces)))
                self.last_stats = reply.get("stats") or {}
                if not reply.get("ok"):
                    raise MadError(str(reply.get("error")))
                yield reply.get("data")
            if _next(got, self.fabric, wait, MadError) is not None:
                raise MadError(f"the agent of {self.fabric.name} relayed more answers than asked")
        except MadError:
            self._agent = None  # asked again next time (the agent lost, another one master)
            raise

    def close(self) -> None:
        self._caller.close()


def _by_switch(keys: Collection[PortKey]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for sw, port in keys:
        out.setdefault(sw, []).append(port)
    return out


class AgentReader:
    """A :class:`~console.telemetry.readers.CounterReader` whose reads the agent makes.

    A sweep in parts is one request: the agent streams each part's counters back as its MAD
    reader reads them (``part`` reports), so the collector publishes the first switches while
    the agent reads the rest, as it does with a local reader. The request goes from a thread of
    this reader's own with one event loop for its life (:class:`~console.fabric.agents.rpc.Caller`);
    the parts come through a queue."""

    #: the collector may read in parts: the agent streams them
    partial_reads = True

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.last: dict[str, Any] = {}
        self._fresh = True
        self.held: dict[PortKey, tuple[dict[str, int], str]] = {}  # errors and state last received
        self._caller = rpc.Caller(f"agent-read-{fabric.pk}")

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

        future = self._caller.ask(agent, "read_counters", payload, timeout=READ_TIMEOUT_S, on_part=got.put)
        future.add_done_callback(lambda f: got.put(f.exception() or None))
        if fresh:
            self.held.clear()
        for part in parts:
            item = _next(got, self.fabric, READ_TIMEOUT_S + rpc.ACCEPT_TIMEOUT_S + 5, ReaderError)
            if item is None:
                raise ReaderError(f"the agent of {self.fabric.name} sent fewer parts than asked")
            self.last = dict(item.get("last") or {})
            yield decode_sweep(str(item["sweep"]), list(part), self.held)
        if _next(got, self.fabric, READ_TIMEOUT_S + rpc.ACCEPT_TIMEOUT_S + 5, ReaderError) is not None:
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
        self._caller.close()


def _next(
    got: queue.SimpleQueue[dict[str, Any] | BaseException | None],
    fabric: Fabric,
    wait: float,
    error: type[RuntimeError],
) -> dict[str, Any] | None:
    """The next part (None: the request ended), or the request's error raised as ``error``."""
    try:
        item = got.get(timeout=wait)
    except queue.Empty as exc:
        raise error(f"through the agent of {fabric.name}: no answer") from exc
    if isinstance(item, error):
        raise item
    if isinstance(item, BaseException):
        raise error(f"through the agent of {fabric.name}: {item}") from item
    return item
