"""Counter readers: how a sweep's port counters are fetched from a fabric's driver.

- :class:`MadReader` (lab and OpenSM hosts): one long-lived libibmad helper process
  (:mod:`console.fabric.diags.madworker`, through :class:`console.fabric.diags.mad.MadSession`),
  many MADs in flight; the fast path. Per sweep it reads the data counters of every port, the
  error counters only of switches whose AllPortSelect error sums moved, and link state of the
  ports the collector asks for (see ``docs/benchmarks.md`` for what that costs).
- :class:`PerfqueryReader`: ``perfquery -x -l`` and ``perfquery -l`` per switch through the
  DiagRunner (timeouts), a few parallel workers, link state from one ``ibnetdiscover``. The
  fallback where libibmad cannot be loaded; measured at 6-8 s per sweep for the 2,048-GPU lab.
- :class:`UfmReader`: the UFM driver hook (port states from UFM's REST ports list).
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from console.fabric.diags.mad import READ_DATA, READ_ERRORS, READ_STATE, MadError, MadSession
from console.fabric.diags.parsers import DiagParseError, parse_perfquery
from console.fabric.diags.runner import DiagEnv, DiagError, DiagRunner
from console.telemetry.core import WATCHED_COUNTERS, PortReading

PortKey = tuple[str, int]  # (switch name, port)
ALL_PORTS = 255  # PortSelect of AllPortSelect: the sums over every port of a switch
#: Largest value of each watched PortCounters field (16 bits, LinkDowned and LinkErrorRecovery 8,
#: PortXmitWait 32): a sum there is saturated and no longer shows changes.
ERROR_MAX = {
    "SymbolErrorCounter": 0xFFFF,
    "LinkDownedCounter": 0xFF,
    "LinkErrorRecoveryCounter": 0xFF,
    "PortXmitWait": 0xFFFFFFFF,
    "PortRcvErrors": 0xFFFF,
    "PortXmitDiscards": 0xFFFF,
}


class ReaderError(RuntimeError):
    """The counters could not be read this sweep."""


class CounterReader(Protocol):
    """Reads the given switch ports; ``lids`` maps switch name → LID; ``state``: the ports
    whose link state must be read this sweep (None: all; a reader may read more)."""

    def read(
        self,
        ports: Mapping[str, list[int]],
        lids: Mapping[str, int],
        *,
        state: Collection[PortKey] | None = None,
    ) -> dict[PortKey, PortReading]: ...

    def lft(self, lid: int, top: int) -> list[int] | None: ...

    def close(self) -> None: ...


@dataclass
class SweepSums:
    """Phase 1 of a sweep: the switches whose ports' error counters must be read, and the
    AllPortSelect sums their ports will match once read."""

    dirty: set[str]
    fresh: dict[str, tuple[int, ...]] = field(default_factory=dict)
    mads: int = 0


class MadReader:
    """Reads through a :class:`~console.fabric.diags.mad.MadSession` (the libibmad helper of
    :mod:`console.fabric.diags.madworker`) started with the diag environment.

    What one sweep costs on the wire (``error_sums`` on, the default):

    1. PortCounters with PortSelect 255 (AllPortSelect: the sums over every port) per switch;
    2. PortCountersExtended (data counters) of every port asked for; PortInfo (link state) of the
       ``state`` ports only (None: all); PortCounters (errors) of every port of the switches whose
       error sums moved since their ports were last read, are saturated or unknown, or that do
       not answer AllPortSelect.

    The error totals and link states not read this sweep are the last ones read (cached here), so
    every :class:`PortReading` is complete. An unchanged sum means no watched error counter of the
    switch moved since its ports were read (the sum is always taken before the per-port reads it
    vouches for), so the error deltas stay exact.

    ``session``: any object with :class:`MadSession`'s ``start``/``stream``/``last_stats``/
    ``close`` (the fabric's agent relaying its helper: :class:`~console.telemetry.agent_reader.RemoteMadSession`).
    ``sums_ahead``: step 1 of the next sweep is asked at the end of this one's stream, so a sweep
    is one exchange with the helper, not two (what a helper a network hop away needs). Those sums
    are still taken after every per-port read of this sweep and before every one of the next, all
    the rule above asks; a counter that moves between them is seen one sweep later.
    """

    #: reading the fabric a few switches at a time costs no more than in one go
    partial_reads = True

    def __init__(
        self,
        env: DiagEnv | None,
        *,
        timeout: float = 10.0,
        mode: str | None = None,
        window: int | None = None,
        error_sums: bool = True,
        session: Any = None,
        sums_ahead: bool = False,
    ) -> None:
        self.env = env
        self.timeout = timeout
        if session is None:
            assert env is not None, "a MAD reader needs a diag environment or a session"
            session = MadSession(env, timeout=timeout, mode=mode, window=window)
        self.session = session
        self.error_sums = error_sums
        self.sums_ahead = sums_ahead and error_sums
        self._ahead: tuple[list[str], list, dict[str, Any]] | None = None  # next sweep's step 1: switches, rows, stats
        self.sums: dict[str, tuple[int, ...]] = {}  # switch → error sums its ports match
        self.errors: dict[PortKey, dict[str, int]] = {}  # last error totals read per port
        self.states: dict[PortKey, str] = {}  # last link state read per port
        #: what the last :meth:`read` did: MADs, seconds, ports whose errors/state were read
        self.last: dict[str, Any] = {}

    def _start(self) -> None:
        try:
            self.session.start()
        except MadError as exc:
            raise ReaderError(f"MAD helper failed: {exc}") from exc

    def _ask(self, request: dict[str, Any]) -> Any:
        return list(self._stream([request]))[0]

    def _changed_switches(self, switches: list[str], lids: Mapping[str, int]) -> SweepSums:
        """Switches whose ports' error counters must be read this sweep (phase 1): asked now, or
        taken from the end of the last sweep's stream (``sums_ahead``)."""
        if not self.error_sums:
            return SweepSums(set(switches))
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == switches:
            self._count(ahead[2])  # its MADs count with the sweep they serve
            return self._compare_sums(switches, ahead[1])
        rows = self._ask(self._sums_request(switches, lids))
        self._count()
        return self._compare_sums(switches, rows)

    @staticmethod
    def _sums_request(switches: list[str], lids: Mapping[str, int]) -> dict[str, Any]:
        return {"op": "counters", "ports": [[lids[sw], ALL_PORTS, READ_ERRORS] for sw in switches]}

    def _compare_sums(self, switches: list[str], rows: list) -> SweepSums:
        changed = set()
        fresh: dict[str, tuple[int, ...]] = {}
        for sw, row in zip(switches, rows, strict=True):
            sums = tuple((row[2] or {}).get(n, -1) for n in WATCHED_COUNTERS) if row else ()
            if not sums or min(sums) < 0 or any(v >= ERROR_MAX[n] for v, n in zip(sums, WATCHED_COUNTERS, strict=True)):
                changed.add(sw)  # no AllPortSelect answer, or a saturated sum: read the ports
                self.sums.pop(sw, None)
                continue
            fresh[sw] = sums
            if self.sums.get(sw) != sums:
                changed.add(sw)
                self.sums.pop(sw, None)
        return SweepSums(changed, fresh)

    def _count(self, stats: Mapping[str, Any] | None = None) -> None:
        stats = self.session.last_stats if stats is None else stats
        last = self.last
        last["mads"] = last.get("mads", 0) + int(stats.get("mads", 0))
        last["mad_seconds"] = last.get("mad_seconds", 0.0) + float(stats.get("seconds", 0))
        last["mode"] = stats.get("mode", "")

    def begin_sweep(self, ports: Mapping[str, list[int]], lids: Mapping[str, int]) -> SweepSums:
        """Read every switch's error sums now, for the :meth:`read` calls of this sweep (one
        request instead of one per part when the collector reads the fabric in parts)."""
        self.last = {}
        sums = self._changed_switches([sw for sw in ports if sw in lids], lids)
        sums.mads = int(self.last.get("mads", 0))
        return sums

    def read(
        self,
        ports: Mapping[str, list[int]],
        lids: Mapping[str, int],
        *,
        state: Collection[PortKey] | None = None,
        sums: SweepSums | None = None,
    ) -> dict[PortKey, PortReading]:
        return list(self.read_parts([ports], lids, state=state, sums=sums))[0]

    def read_parts(
        self,
        parts: Sequence[Mapping[str, list[int]]],
        lids: Mapping[str, int],
        *,
        state: Collection[PortKey] | None = None,
        sums: SweepSums | None = None,
    ) -> Iterator[dict[PortKey, PortReading]]:
        """:meth:`read` of each part in turn, as one stream: the helper reads part k+1 while
        the caller handles part k (``last`` describes the part just yielded)."""
        started = time.monotonic()
        self.last = {}
        switches = [sw for part in parts for sw in part if sw in lids]
        if sums is None:
            sums = self._changed_switches(switches, lids)
        else:
            self.last["mads"], sums.mads = sums.mads, 0  # counted with the first part
        wanted = None if state is None else set(state)
        dirty = sums.dirty
        plans: deque[tuple[list[str], list[PortKey], list[list[int]]]] = deque()
        self._ahead = None

        def requests() -> Iterator[dict[str, Any]]:
            for part in parts:  # planned as it is sent: part k+1 while part k is read
                plans.append(self._plan(part, lids, dirty, wanted))
                yield {"op": "counters", "ports": plans[-1][2]}
            if self.sums_ahead:
                yield self._sums_request(switches, lids)

        for i, data in enumerate(self._stream(requests())):
            if i == len(parts):  # the next sweep's sums (after this sweep's last part)
                self._ahead = (switches, data, dict(self.session.last_stats))
                break
            switches_i, order, wire = plans.popleft()
            if i:
                self.last = {}
            self._count()
            out = self._settle(switches_i, order, wire, data, sums)
            self.last["seconds"] = time.monotonic() - started
            yield out
            started = time.monotonic()

    def _stream(self, requests: Iterable[dict[str, Any]]) -> Iterator[Any]:
        """The helper's answers (MadSession.stream) with its errors as ReaderError."""
        try:
            yield from self.session.stream(requests)
        except MadError as exc:
            raise ReaderError(str(exc)) from exc

    def _plan(
        self, ports: Mapping[str, list[int]], lids: Mapping[str, int], dirty: set[str], wanted: set[PortKey] | None
    ) -> tuple[list[str], list[PortKey], list[list[int]]]:
        """What to ask for ``ports``: (switches, port keys, wire rows [lid, port, mask])."""
        switches = [sw for sw in ports if sw in lids]
        errors, states = self.errors, self.states
        order: list[PortKey] = []
        wire: list[list[int]] = []
        for sw in switches:
            lid, all_errors = lids[sw], sw in dirty
            for p in ports[sw]:
                key = (sw, p)
                mask = READ_DATA
                if all_errors or key not in errors:
                    mask |= READ_ERRORS
                if wanted is None or key in wanted or key not in states:
                    mask |= READ_STATE
                order.append(key)
                wire.append([lid, p, mask])
        return switches, order, wire

    def _settle(
        self, switches: list[str], order: list[PortKey], wire: list[list[int]], data: list, sums: SweepSums
    ) -> dict[PortKey, PortReading]:
        """Readings from the helper's answer to :meth:`_plan`'s wire rows; the caches and the
        sums the switches' ports now match updated."""
        dirty = sums.dirty & set(switches)
        errors, states = self.errors, self.states
        out: dict[PortKey, PortReading] = {}
        errors_read = states_read = 0
        failed: set[str] = set()
        none: dict[str, int] = {}
        # (the error dicts are shared with the cache: replaced when read again, never changed)
        for key, (_lid, _port, mask), row in zip(order, wire, data, strict=True):
            if row is None:
                failed.add(key[0])
                continue
            if mask & READ_ERRORS:
                if row[2]:
                    errors[key] = row[2]
                    errors_read += 1
                else:  # the PortCounters MAD failed: keep the last totals, re-read next sweep
                    failed.add(key[0])
            if mask & READ_STATE:
                states[key] = row[3] or ""
                states_read += 1
            out[key] = PortReading(row[0], row[1], errors.get(key, none), states.get(key, ""))
        for sw in dirty - failed:
            if sw in sums.fresh:
                self.sums[sw] = sums.fresh[sw]
        for sw in failed:
            self.sums.pop(sw, None)
        self.last.update(ports=len(order), errors_read=errors_read, states_read=states_read, dirty_switches=len(dirty))
        return out

    def lft(self, lid: int, top: int) -> list[int] | None:
        return self._ask({"op": "lft", "lid": lid, "top": top})

    def lfts(self, lids: Sequence[int], top: int) -> list[list[int] | None]:
        """Many switches' forwarding tables in one stream (None: a switch that did not answer)."""
        return list(self._stream({"op": "lft", "lid": int(lid), "top": top} for lid in lids))

    def close(self) -> None:
        self.session.close()


def parse_perfquery_ports(text: str) -> dict[int, dict[str, int]]:
    """``perfquery [-x] -l <lid> 255`` (one block per port) → port → counters."""
    out: dict[int, dict[str, int]] = {}
    for block in re.split(r"(?m)^(?=# Port )", text):
        if not block.startswith("# Port"):
            continue
        try:
            counters = parse_perfquery(block)
        except DiagParseError:
            continue
        if counters.port is not None:
            out[counters.port] = counters.counters
    return out


class PerfqueryReader:
    """perfquery per switch (both counter groups), ``workers`` at a time."""

    def __init__(self, runner: DiagRunner, *, workers: int = 4) -> None:
        self.runner = runner
        self.workers = workers
        self._expected: dict[str, list[int]] = {}

    def _switch(self, lid: int) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
        ext = self.runner.run("perfquery", "-x", "-l", str(lid), "255").stdout
        basic = self.runner.run("perfquery", "-l", str(lid), "255").stdout
        return parse_perfquery_ports(ext), parse_perfquery_ports(basic)

    def read(
        self,
        ports: Mapping[str, list[int]],
        lids: Mapping[str, int],
        *,
        state: Collection[PortKey] | None = None,
    ) -> dict[PortKey, PortReading]:
        switches = [sw for sw in ports if sw in lids]
        down = self._down_ports(lids)
        out: dict[PortKey, PortReading] = {}
        with ThreadPoolExecutor(self.workers) as pool:
            results = pool.map(lambda sw: (sw, self._try(lids[sw])), switches)
            for sw, got in results:
                if got is None:
                    continue
                ext, basic = got
                for port in ports[sw]:
                    if port not in ext:
                        continue
                    errors = {n: basic.get(port, {}).get(n, 0) for n in WATCHED_COUNTERS}
                    link_state = "Down" if (sw, port) in down else "Active"
                    out[(sw, port)] = PortReading(
                        ext[port].get("PortXmitData", 0), ext[port].get("PortRcvData", 0), errors, link_state
                    )
        return out

    def _try(self, lid: int) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]] | None:
        try:
            return self._switch(lid)
        except DiagError:
            return None

    def _down_ports(self, lids: Mapping[str, int]) -> set[PortKey]:
        """Ports of switches that ibnetdiscover no longer sees cabled (cable pulled)."""
        try:
            topo = self.runner.ibnetdiscover()
        except DiagError:
            return set()
        name_of = {lid: sw for sw, lid in lids.items()}
        cabled: dict[str, set[int]] = {}
        for link in topo.links:
            for node_id, port in ((link.a_id, link.a_port), (link.b_id, link.b_port)):
                node = topo.nodes.get(node_id)
                if node is not None and node.lid in name_of:
                    cabled.setdefault(name_of[node.lid], set()).add(port)
        return {(sw, p) for sw, ports in self._expected.items() for p in ports if p not in cabled.get(sw, set())}

    def expect(self, ports: Mapping[str, list[int]]) -> None:
        """The ports that should be cabled (from the design)."""
        self._expected = dict(ports)

    def lft(self, lid: int, top: int) -> list[int] | None:
        try:
            return parse_ibroute(self.runner.ibroute(lid), top)
        except DiagError:
            return None

    def close(self) -> None:
        return None


_ROUTE_RE = re.compile(r"^0x([0-9a-fA-F]+)\s+(\d+)\s*:")


def read_lfts(reader: CounterReader, lids: Sequence[int], top: int) -> list[list[int] | None]:
    """Many switches' forwarding tables (None: a switch that did not answer): in one request where
    the reader can (the agent's ``lfts``), else one switch at a time."""
    batch = getattr(reader, "lfts", None)
    if batch is not None:
        tables: list[list[int] | None] = batch(list(lids), top)
        return tables
    return [reader.lft(lid, top) for lid in lids]


def parse_ibroute(text: str, top: int) -> list[int]:
    """``ibroute <lid>`` → egress port per destination LID (0 where the table has no entry)."""
    out = [0] * (top + 1)
    for line in text.splitlines():
        m = _ROUTE_RE.match(line.strip())
        if m:
            lid = int(m[1], 16)
            if lid <= top:
                out[lid] = int(m[2])
    return out


class UfmReader:
    """UFM driver hook: port states from UFM's ports list; counters come from UFM Telemetry when
    the fabric config names its endpoint (``telemetry_url``), otherwise rates stay 0."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def read(
        self,
        ports: Mapping[str, list[int]],
        lids: Mapping[str, int],
        *,
        state: Collection[PortKey] | None = None,
    ) -> dict[PortKey, PortReading]:
        out: dict[PortKey, PortReading] = {}
        wanted = {(sw, p) for sw, plist in ports.items() for p in plist}
        for row in self.client.ports():
            key = (str(row.get("system_name", "")), int(row.get("number", 0) or 0))
            if key in wanted:
                link_state = "Active" if row.get("logical_state") == "Active" else "Down"
                out[key] = PortReading(state=link_state)
        return out

    def lft(self, lid: int, top: int) -> list[int] | None:
        return None

    def close(self) -> None:
        return None


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """(result, seconds) of one call."""
    started = time.monotonic()
    result = fn(*args)
    return result, time.monotonic() - started


def all_ports(ports: Iterable[PortKey]) -> dict[str, list[int]]:
    """[(switch, port)] → switch → ports."""
    out: dict[str, list[int]] = {}
    for sw, p in ports:
        out.setdefault(sw, []).append(p)
    return out
