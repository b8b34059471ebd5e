"""The collector: one loop per fabric — drive the lab's traffic, read counters, compute, alarm,
publish coalesced deltas, store samples.

Run it as its own process (``manage.py collector``), as a thread of the embedded web process
(``manage.py up`` without Redis) or, as a fallback, one sweep at a time from Celery beat.

A sweep with the MAD reader reads the fabric ``read_chunk_switches`` switches at a time and hands
each live group its delta as soon as every link of that group is read (a tenant whose links sit
on the first switches hears about them before the last switch is read; the fabric group after
the last part): still at most one delta per group per sweep. The MAD reader streams the parts:
the helper reads part k+1 while this process handles part k. Link state is read every
``state_every`` sweeps per port and error counters only where a switch's sums moved (see
:class:`~console.telemetry.readers.MadReader`); history samples are written in a background
thread.

This module is the reader loop; the jobs and their lab traffic are
:mod:`console.telemetry.workload`'s, the live deltas and snapshots
:mod:`console.telemetry.publisher`'s, the history samples :mod:`console.telemetry.history`'s.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from console.fabric.diags.runner import DiagEnv, DiagError, DiagRunner
from console.fabric.diags.topology import Topology
from console.fabric.discovery.sources import local_host
from console.fabric.drivers.hosts import OpenSmHost
from console.fabric.lab.fabrics import LabNotRunning, lab_for
from console.fabric.lab.manager import Lab
from console.fabric.models import Fabric, FabricAgent
from console.telemetry import agent_reader, lost_paths, services, store
from console.telemetry.agent_ops import phy_on, routing_on
from console.telemetry.alarms import AlarmEngine, AlarmRules, Transition
from console.telemetry.core import LinkStatus, PortReading, state_due, sweep_status
from console.telemetry.history import HistoryWriter
from console.telemetry.linkmap import LinkMap, build_link_map
from console.telemetry.port_health import PortHealth
from console.telemetry.power import powered_off_links
from console.telemetry.publisher import LivePublisher
from console.telemetry.readers import CounterReader, MadReader, PerfqueryReader, PortKey, ReaderError
from console.telemetry.traffic import Job
from console.telemetry.workload import Workload
from console.tenancy.context import Actor
from designer.services import revision_graph

log = logging.getLogger(__name__)
ACTOR = Actor.system("telemetry.collector")
#: Fabrics whose counters the collector reads: through their agent, or (a lab, an OpenSM on this
#: host) here. A UFM fabric's telemetry is UFM's.
COLLECTED = (Fabric.Driver.LAB, Fabric.Driver.OPENSM, Fabric.Driver.AGENT)
SLOW_EVERY = 5  # sweeps between SM/routing/push checks and reservation refreshes


@dataclass
class CollectorOptions:
    """How one fabric is collected."""

    interval: float = 1.0
    store_interval: float = 10.0
    lab_traffic: bool = True
    reader: str = "auto"  # auto | mad | perfquery
    workers: int = 4
    #: MAD reader: "pipelined" (many MADs in flight) or "sync" (one at a time); None: the
    #: helper's default (pipelined where it can); ``mad_window``: MADs in flight
    mad_mode: str | None = None
    mad_window: int | None = None
    #: read a port's link state (PortInfo) every ``state_every`` sweeps (ports that are down or
    #: unknown every sweep), so a state change shows within ``state_every`` sweeps
    state_every: int = 2
    #: read per-port error counters only of switches whose AllPortSelect error sums moved
    error_sums: bool = True
    #: read the fabric this many switches at a time and publish each group's delta as soon as
    #: all of its links are read (still one delta per group per sweep); 0: one read, then publish
    read_chunk_switches: int = 16
    jobs: tuple[Job, ...] | None = None  # explicit traffic (tests, benchmarks); None: reservations


@dataclass
class SweepReport:
    """What one sweep did and how long it took."""

    cycle_s: float
    read_s: float
    write_s: float
    links: int
    changed: int
    events: int
    ports_written: int = 0
    publish_s: float = 0.0  # sweep start → the last group's delta handed to the channel layer
    mads: int = 0  # MADs the read sent (MAD reader)
    states_read: int = 0
    errors_read: int = 0


class FabricCollector:
    """Collects one fabric; call :meth:`sweep` every interval (or :meth:`run`)."""

    def __init__(self, fabric: Fabric, options: CollectorOptions | None = None) -> None:
        self.fabric = fabric
        self.options = options or CollectorOptions()
        self.lab: Lab | None = None  # a lab fabric's lab, here: the traffic model writes into it
        self.host: OpenSmHost | None = None  # the SM host read here (no agent)
        self.reader: CounterReader | None = None
        self.lm = LinkMap()
        self.prev: dict[tuple[str, int], PortReading] = {}
        self.missed: Counter[tuple[str, int]] = Counter()  # unanswered sweeps in a row (core.sweep_status)
        self.prev_at = 0.0
        self.overhead = 0.0
        self.alarms = AlarmEngine(
            AlarmRules(
                settings.TELEMETRY_ERROR_OPEN, settings.TELEMETRY_ERROR_CLEAR, settings.TELEMETRY_ERROR_CLEAR_SWEEPS
            )
        )
        self.workload = Workload(fabric.pk, self.options.jobs)
        self.publisher = LivePublisher(fabric.pk, int(time.time() * 1000), self.workload)
        self.history = HistoryWriter(fabric.pk, self.options.store_interval)
        self.sweeps = 0
        self.routing_mark = -1
        self.failures_since = timezone.now() - dt.timedelta(minutes=10)
        self.last_statuses: dict[str, LinkStatus] = {}
        self.chunk_at: dict[int, float] = {}  # chunk → when it was last read (its rates' dt)
        self.sm: dict[str, Any] = {}  # the last slow check's SM and routing state (the dashboard's)
        self.health: PortHealth | None = None  # the health policy (set up with the link map)

    # -- setup -------------------------------------------------------------------------------

    def setup(self) -> None:
        """Design graph, LIDs from one discovery, the reader, forwarding tables; through the
        fabric's agent when it has one."""

        graph = revision_graph(self.fabric.revision)
        topo: Topology
        self.lab = self._local_lab()
        if self.through_agent:
            topo = agent_reader.topology(self.fabric)
            self.reader = self._agent_reader()
        else:
            diags, env = self._diags()
            topo = diags.ibnetdiscover()
            self.reader = self._reader(diags, env)
        self.lm = build_link_map(graph, topo)
        self.node_ids = {name: f"S-{sw.guid:016x}" for name, sw in graph.switches.items()}
        if isinstance(self.reader, PerfqueryReader):
            self.reader.expect(self.lm.measured_ports())
        self.alarms.seed(services.open_conditions(self.fabric.pk))
        self.health = PortHealth(self.fabric.pk, self.lm, self._phy_readings, self.node_ids)
        self._refresh_routes()

    @property
    def through_agent(self) -> bool:
        """Read through the fabric's agent (else on this host, :meth:`_local_host`)."""
        return self.fabric.through_agent

    def _local_host(self) -> OpenSmHost:
        return local_host(self.fabric)

    def _phy_readings(self) -> dict[str, Any]:
        """The PHY readings the SM host records (for the health policy's gauges)."""
        got = agent_reader.phy(self.fabric, timeout=10) if self.through_agent else phy_on(self._local_host())
        return dict(got.get("readings") or {})

    def _local_lab(self) -> Lab | None:
        """A lab fabric's lab when it runs on this host (its traffic model writes counters into
        ibsim); the readings come through the agent (or, for a benchmark's baseline reading the
        lab here, :meth:`_local_host`)."""
        if self.fabric.driver != Fabric.Driver.LAB or not self.options.lab_traffic:
            return None
        try:
            return lab_for(self.fabric)
        except LabNotRunning:
            return None

    def _diags(self) -> tuple[DiagRunner, DiagEnv]:
        self.host = self._local_host()
        runner = self.host.diags(timeout=30)
        return runner, runner.env

    def _agent_reader(self) -> CounterReader:
        o = self.options
        if o.reader == "perfquery":
            return agent_reader.AgentReader(self.fabric)
        return agent_reader.open_reader(self.fabric, mode=o.mad_mode, window=o.mad_window, error_sums=o.error_sums)

    def _reader(self, diags: DiagRunner, env: DiagEnv) -> CounterReader:
        kind = self.options.reader
        if kind in ("auto", "mad"):
            reader = MadReader(
                env, mode=self.options.mad_mode, window=self.options.mad_window, error_sums=self.options.error_sums
            )
            try:
                reader._start()
                return reader
            except ReaderError:
                if kind == "mad":
                    raise
                log.warning("libibmad helper unavailable; falling back to perfquery")
        return PerfqueryReader(diags, workers=self.options.workers)

    def _refresh_routes(self) -> None:
        """The forwarding tables (the lab's traffic model routes over them; the reservations a
        port's traffic serves are read from them, for the health policy's decisions)."""
        if self.reader is None:
            return
        self.workload.refresh_routes(self.lm, self.reader)

    # -- the lab traffic model (console.telemetry.workload) ---------------------------------

    def _refresh_jobs(self) -> None:
        self.workload.refresh_jobs(self.lm)

    def _write_traffic(self, seconds: float) -> int:
        if self.lab is None or not self.options.lab_traffic or not self.prev:
            return 0
        return self.workload.write_counters(self.lab, self.node_ids, self.prev, seconds)

    # -- one sweep ---------------------------------------------------------------------------

    def sweep(self) -> SweepReport:
        """Drive traffic (lab), read, compute, publish, alarm, store."""
        assert self.reader is not None, "call setup() first"
        started = time.monotonic()
        wall = time.time()
        slow = self.sweeps % SLOW_EVERY == 0
        if slow:
            self._refresh_jobs()
        # Counters are stamped for the interval the next read will measure: since the last
        # read, plus the write + read time the previous sweep took.
        seconds = (started - self.prev_at + self.overhead) if self.prev_at else 0.0
        ports_written = self._write_traffic(seconds)
        written = time.monotonic()
        ports = self.lm.measured_ports()
        due = state_due(ports, self.prev, self.sweeps, self.options.state_every)
        chunks = self._chunks(ports)
        early = len(chunks) > 1
        ready = self.publisher.groups_ready(chunks, self.lm) if early else {}
        by_switch: dict[str, list] = defaultdict(list)
        for end in self.lm.ends.values():
            by_switch[end.switch].append(end)
        readings: dict[tuple[str, int], PortReading] = {}
        statuses: dict[str, LinkStatus] = {}
        stats = {"mads": 0, "states_read": 0, "errors_read": 0}
        changed = 0
        published = started
        extra_args: dict[str, Any] = {}
        begin = getattr(self.reader, "begin_sweep", None)
        if early and begin is not None:  # the MAD reader's error sums: once, not per part
            extra_args["sums"] = begin(ports, self.lm.switch_lids)
        read_at: dict[int, float] = {}
        for i, (chunk, got) in enumerate(zip(chunks, self._read_parts(chunks, due, extra_args), strict=True)):
            done = read_at[i] = time.monotonic()
            for k in stats:
                stats[k] += int(getattr(self.reader, "last", {}).get(k, 0))
            # each chunk's rates over the time since that chunk was last read
            last = self.chunk_at.get(i) if len(self.chunk_at) == len(chunks) else None
            readings.update(got)
            ends = [e for sw in chunk for e in by_switch[sw]]
            statuses.update(sweep_status(ends, got, self.prev, done - last if last else 0.0, self.missed))
            for end in ends:  # a port in its grace keeps its last reading for the next sweep
                key = (end.switch, end.port)
                if key not in got and key in self.missed and key in self.prev:
                    readings[key] = self.prev[key]
            if early and ready.get(i):
                changed += self._publish(statuses, wall, ready[i])
                published = time.monotonic()
        read_done = time.monotonic()
        self.prev, self.prev_at, self.chunk_at = readings, read_done, read_at
        self.overhead = read_done - started
        transitions = self.alarms.links(
            statuses, powered_off_links(self.fabric.pk, self.lm), now=time.time(), describe=self.lm.describe
        )
        extra: dict[str, list] = {}
        if slow:
            transitions += self._slow_checks(extra)
        if self.health is not None:
            if slow:
                self.health.refresh()
            self.health.observe(wall, readings, self.workload.link_owners)
        affected = dict(self.workload.link_owners)
        affected.update(extra)
        events = services.apply_transitions(self.fabric.pk, transitions, affected, actor=ACTOR)
        lost_paths.update(self.fabric.pk, self.lm, events)  # nodes cut off: no placement, drained in Slurm
        if not early:
            changed = self._publish(statuses, wall)
            published = time.monotonic()
        self.publisher.change_progress()
        self._snapshot(statuses, wall, time.monotonic() - started)
        self.history.add(statuses, self.lm)
        store.heartbeat(self.fabric.pk, max(5.0, self.options.interval * 5))
        self.sweeps += 1
        self.last_statuses = statuses
        return SweepReport(
            time.monotonic() - started,
            read_done - written,
            written - started,
            len(statuses),
            changed,
            len(events),
            ports_written,
            published - started,
            stats["mads"],
            stats["states_read"],
            stats["errors_read"],
        )

    def _read_parts(
        self, chunks: list[dict[str, list[int]]], due: set[PortKey] | None, extra: dict[str, Any]
    ) -> Iterator[dict[PortKey, PortReading]]:
        """Each chunk's readings in turn: one stream where the reader can (the MAD helper reads
        the next part while this process handles the last), else one read per chunk."""
        reader = self.reader
        assert reader is not None, "call setup() first"
        lids = self.lm.switch_lids
        parts = getattr(reader, "read_parts", None)
        if parts is not None:
            yield from parts(chunks, lids, state=due, **extra)
            return
        for chunk in chunks:
            yield reader.read(chunk, lids, state=due, **extra)

    def _chunks(self, ports: dict[str, list[int]]) -> list[dict[str, list[int]]]:
        """The measured ports split into reads of ``read_chunk_switches`` switches each."""
        size = self.options.read_chunk_switches
        switches = list(ports)
        # (a reader that reads the whole fabric anyway, like perfquery's ibnetdiscover, is not
        # asked in parts)
        partial = getattr(self.reader, "partial_reads", False)
        if size <= 0 or len(switches) <= size or not partial:
            return [ports]
        return [{sw: ports[sw] for sw in switches[i : i + size]} for i in range(0, len(switches), size)]

    def _slow_checks(self, affected: dict[str, list[Any]]) -> list[Transition]:
        """The routing check and the SM's state, for every fabric: read by its agent (whose
        heartbeats raise the SM-state alarm: ``telemetry.agent_watch``), or on the host here."""
        out: list[Transition] = []
        routing = self._routing()
        if routing is not None:
            out += self.alarms.routing(routing["configured"], routing["in_use"], routing["fallback"])
            if self.routing_mark not in (-1, routing["mark"]):  # OpenSM routed again: read the new tables
                self._refresh_routes()
            self.routing_mark = routing["mark"]
            self.sm = {"configured": routing["configured"], "in_use": routing["in_use"], "at": time.time()}
        if self.through_agent:
            self.sm.update(self._agent_sm())
        elif self.host is not None:
            try:
                info = self.host.diags(timeout=3).sminfo()
                state = info.state
                self.sm.update(
                    priority=info.priority, lid=info.lid, guid=f"0x{info.guid:016x}", activity=info.activity_count
                )
            except DiagError:
                state = "NO ANSWER"
            self.sm["state"] = state
            out += self.alarms.sm_state(state)
        out += services.wire_drift_transitions(self.fabric.pk, self.failures_since)
        failures, hits = services.push_failure_transitions(self.fabric.pk, self.failures_since)
        affected.update(hits)
        return out + failures

    def _routing(self) -> dict[str, Any] | None:
        if self.through_agent:
            try:
                return agent_reader.routing(self.fabric)
            except ReaderError as exc:
                log.info("routing check of %s: %s", self.fabric.name, exc)
                return None
        return routing_on(self.host) if self.host is not None else None

    def _agent_sm(self) -> dict[str, Any]:
        """The SM as the fabric's agents last reported it (the master's first)."""
        rows = list(FabricAgent.objects.filter(fabric=self.fabric, revoked_at__isnull=True).order_by("-last_seen"))
        if not rows:
            return {"state": "NO AGENT"}
        agent = next((a for a in rows if a.sm_state == "MASTER"), rows[0])
        return {
            "state": agent.sm_state or "NO ANSWER",
            "priority": agent.sm_priority,
            "guid": agent.port_guid,
            "agent": agent.name,
        }

    def _publish(self, statuses: dict[str, LinkStatus], wall: float, only: list[str] | None = None) -> int:
        return self.publisher.publish(statuses, wall, only)

    def _snapshot(self, statuses: dict[str, LinkStatus], wall: float, cycle: float) -> None:
        self.publisher.snapshot(statuses, wall, cycle, self.lm, sm=self.sm)

    # -- the loop ----------------------------------------------------------------------------

    def run(self, *, stop: Callable[[], bool] = lambda: False, sweeps: int | None = None) -> None:
        """Sweep every interval until ``stop()`` (or ``sweeps`` done); survives bad sweeps."""
        done = 0
        while not stop() and (sweeps is None or done < sweeps):
            started = time.monotonic()
            try:
                report = self.sweep()
                log.debug("sweep %s: %s", self.fabric.pk, report)
            except (ReaderError, OSError) as exc:
                log.warning("sweep of fabric %s failed: %s", self.fabric.pk, exc)
                close_old_connections()
            done += 1
            time.sleep(max(0.0, self.options.interval - (time.monotonic() - started)))

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
        self.history.close()
