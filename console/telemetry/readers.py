"""Counter readers: how a sweep's port counters are fetched from a fabric's driver.

- :class:`MadReader` (lab and OpenSM hosts): one long-lived libibmad helper process
  (:mod:`console.fabric.diags.madworker`, through :class:`console.fabric.diags.mad.MadSession`);
  the fast path, ~0.3 s for the 2,048-GPU lab.
- :class:`PerfqueryReader`: ``perfquery -x -l`` and ``perfquery -l`` per switch through the
  DiagRunner (timeouts), a few parallel workers, link state from one ``ibnetdiscover``. The
  fallback where libibmad cannot be loaded; measured at 6-8 s per sweep for the 2,048-GPU lab.
- :class:`UfmReader`: the UFM driver hook (port states from UFM's REST ports list).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from console.fabric.diags.mad import MadError, MadSession
from console.fabric.diags.parsers import DiagParseError, parse_perfquery
from console.fabric.diags.runner import DiagEnv, DiagError, DiagRunner
from console.telemetry.core import ERROR_COUNTERS, PortReading

PortKey = tuple[str, int]  # (switch name, port)


class ReaderError(RuntimeError):
    """The counters could not be read this sweep."""


class CounterReader(Protocol):
    """Reads the given switch ports; ``lids`` maps switch name → LID."""

    def read(
        self, ports: Mapping[str, list[int]], lids: Mapping[str, int]
    ) -> dict[PortKey, PortReading]: ...

    def lft(self, lid: int, top: int) -> list[int] | None: ...

    def close(self) -> None: ...


class MadReader:
    """Reads through a :class:`~console.fabric.diags.mad.MadSession` (the libibmad helper of
    :mod:`console.fabric.diags.madworker`) started with the diag environment."""

    def __init__(self, env: DiagEnv, *, timeout: float = 10.0) -> None:
        self.env = env
        self.timeout = timeout
        self.session = MadSession(env, timeout=timeout)

    def _start(self) -> None:
        try:
            self.session.start()
        except MadError as exc:
            raise ReaderError(f"MAD helper failed: {exc}") from exc

    def _ask(self, request: dict[str, Any]) -> Any:
        try:
            return self.session.request(request)
        except MadError as exc:
            raise ReaderError(str(exc)) from exc

    def read(self, ports, lids):
        order = [(sw, p) for sw, plist in ports.items() if sw in lids for p in plist]
        data = self._ask({"op": "counters", "ports": [[lids[sw], p] for sw, p in order]})
        out: dict[PortKey, PortReading] = {}
        for key, row in zip(order, data, strict=True):
            if row is not None:
                out[key] = PortReading(row[0], row[1], row[2], row[3])
        return out

    def lft(self, lid: int, top: int) -> list[int] | None:
        return self._ask({"op": "lft", "lid": lid, "top": top})

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

    def read(self, ports, lids):
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
                    errors = {n: basic.get(port, {}).get(n, 0) for n in ERROR_COUNTERS}
                    state = "Down" if (sw, port) in down else "Active"
                    out[(sw, port)] = PortReading(ext[port].get("PortXmitData", 0),
                                                  ext[port].get("PortRcvData", 0), errors,
                                                  state)  # fmt: skip
        return out

    def _try(self, lid: int):
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
        return {(sw, p) for sw, ports in self._expected.items() for p in ports
                if p not in cabled.get(sw, set())}  # fmt: skip

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

    def read(self, ports, lids):
        out: dict[PortKey, PortReading] = {}
        wanted = {(sw, p) for sw, plist in ports.items() for p in plist}
        for row in self.client.ports():
            key = (str(row.get("system_name", "")), int(row.get("number", 0) or 0))
            if key in wanted:
                state = "Active" if row.get("logical_state") == "Active" else "Down"
                out[key] = PortReading(state=state)
        return out

    def lft(self, lid: int, top: int) -> list[int] | None:
        return None

    def close(self) -> None:
        return None


def timed(fn, *args: Any) -> tuple[Any, float]:
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
