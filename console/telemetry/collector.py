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
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connections
from django.db.models import Q
from django.utils import timezone

from console.broadcast import change_group, current_seqs, fabric_group, publish_many, tenant_group
from console.fabric.models import ChangeRequest, Fabric
from console.telemetry import services, store
from console.telemetry.alarms import AlarmEngine, AlarmRules
from console.telemetry.core import (
    LinkStatus,
    PortReading,
    changed_links,
    state_due,
    sweep_status,
)
from console.telemetry.labwriter import console_batch, counter_commands
from console.telemetry.linkmap import LinkMap, build_link_map
from console.telemetry.readers import CounterReader, MadReader, PerfqueryReader, ReaderError
from console.telemetry.traffic import Job, PortLoad, route_load, words
from console.tenancy.context import Actor

log = logging.getLogger(__name__)
ACTOR = Actor.system("telemetry.collector")
SLOW_EVERY = 5  # sweeps between SM/routing/push checks and reservation refreshes
KEEPALIVE_S = 10.0  # an empty delta at least this often, so clients notice gaps


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


@dataclass
class _Published:
    keys: dict[str, tuple[bool, int, bool]] = field(default_factory=dict)
    last: float = 0.0


def _in_memory_db() -> bool:
    connection = connections["default"]
    return connection.vendor == "sqlite" and connection.is_in_memory_db()


def port_link(lm: LinkMap, switch: str, port: int) -> str | None:
    """The link plugged into ``switch[port]`` (measured at either end)."""
    if f"{switch}/{port}" in lm.ends:
        return f"{switch}/{port}"
    peer = lm.ports.get(switch, {}).get(port)
    if peer and f"{peer[0]}/{peer[1]}" in lm.ends:
        return f"{peer[0]}/{peer[1]}"
    return None


class FabricCollector:
    """Collects one fabric; call :meth:`sweep` every interval (or :meth:`run`)."""

    def __init__(self, fabric: Fabric, options: CollectorOptions | None = None) -> None:
        self.fabric = fabric
        self.options = options or CollectorOptions()
        self.epoch = int(time.time() * 1000)
        self.lab = None
        self.reader: CounterReader | None = None
        self.lm = LinkMap()
        self.prev: dict[tuple[str, int], PortReading] = {}
        self.prev_at = 0.0
        self.overhead = 0.0
        self.alarms = AlarmEngine(
            AlarmRules(
                settings.TELEMETRY_ERROR_OPEN, settings.TELEMETRY_ERROR_CLEAR, settings.TELEMETRY_ERROR_CLEAR_SWEEPS
            )
        )
        self.published: dict[str, _Published] = defaultdict(_Published)
        self.lfts: dict[str, list[int]] = {}
        self.load = PortLoad()
        self.jobs: list[tuple[services.ReservationNodes | None, Job]] = []
        self.link_owners: dict[str, list[tuple[int, int]]] = {}
        self.tenant_links: dict[int, set[str]] = {}
        self.sweeps = 0
        self.routing_mark = -1
        self.acc: dict[str, list[float]] = {}
        self.acc_since = time.monotonic()
        self.failures_since = timezone.now() - dt.timedelta(minutes=10)
        self.last_statuses: dict[str, LinkStatus] = {}
        self.change_sigs: dict[int, tuple] = {}
        self.chunk_at: dict[int, float] = {}  # chunk → when it was last read (its rates' dt)
        self._store_pool: ThreadPoolExecutor | None = None

    # -- setup -------------------------------------------------------------------------------

    def setup(self) -> None:
        """Design graph, LIDs from one discovery, the reader, forwarding tables."""
        from designer.services import revision_graph

        graph = revision_graph(self.fabric.revision)
        diags, env = self._diags()
        self.lm = build_link_map(graph, diags.ibnetdiscover())
        self.node_ids = {name: f"S-{sw.guid:016x}" for name, sw in graph.switches.items()}
        self.reader = self._reader(diags, env)
        if isinstance(self.reader, PerfqueryReader):
            self.reader.expect(self.lm.measured_ports())
        self.alarms.seed(services.open_conditions(self.fabric.pk))
        self._refresh_routes()

    def _diags(self):
        if self.fabric.driver == Fabric.Driver.LAB:
            from console.fabric.labs import lab_for

            self.lab = lab_for(self.fabric)
            runner = self.lab.diags(timeout=30)
            return runner, runner.env
        from console.fabric.drivers import driver_for

        driver = driver_for(self.fabric)
        runner = driver.host.diags(timeout=30)  # type: ignore[attr-defined]
        return runner, runner.env

    def _reader(self, diags, env) -> CounterReader:
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
        if not (self.lab is not None and self.options.lab_traffic) or self.reader is None:
            return
        top = max(self.lm.device_of_lid, default=0)
        self.lfts = {}
        for sw, lid in self.lm.switch_lids.items():
            table = self.reader.lft(lid, top)
            if table is not None:
                self.lfts[sw] = table
        self._recompute_load()

    # -- traffic model -----------------------------------------------------------------------

    def _refresh_jobs(self) -> None:
        if self.options.jobs is not None:
            jobs = [(None, j) for j in self.options.jobs]
        else:
            jobs = [(r, Job(f"res-{r.id}", r.nodes)) for r in services.ready_reservations(self.fabric.pk)]
        if [j for _, j in jobs] != [j for _, j in self.jobs]:
            self.jobs = jobs
            self._recompute_load()
        owners: dict[str, list[tuple[int, int]]] = defaultdict(list)
        tenant_links: dict[int, set[str]] = defaultdict(set)
        for res, job in self.jobs:
            if res is None:
                continue
            host = self.lm.links_of_nodes(set(job.nodes))
            tenant_links[res.tenant_id] |= host
            routed = route_load([job], self.lm, self.lfts).ports() if self.lfts else set()
            for lid in host | {port_link(self.lm, s, p) for s, p in routed} - {None}:
                owners[lid].append((res.id, res.tenant_id))  # type: ignore[index]
        self.link_owners, self.tenant_links = dict(owners), dict(tenant_links)

    def _recompute_load(self) -> None:
        self.load = route_load([j for _, j in self.jobs], self.lm, self.lfts)

    def _write_traffic(self, seconds: float) -> int:
        if self.lab is None or not self.options.lab_traffic or not self.prev:
            return 0
        values = {}
        for key in self.load.ports():
            before = self.prev.get(key)
            if before is None:
                continue
            values[key] = (
                before.xmit_words + words(self.load.xmit.get(key, 0.0), seconds),
                before.rcv_words + words(self.load.rcv.get(key, 0.0), seconds),
            )
        if values:
            console_batch(self.lab, counter_commands(self.node_ids, values))
        return len(values)

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
        ready = self._groups_ready(chunks) if early else {}
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
            statuses.update(sweep_status(ends, got, self.prev, done - last if last else 0.0))
            if early and ready.get(i):
                changed += self._publish(statuses, wall, ready[i])
                published = time.monotonic()
        read_done = time.monotonic()
        self.prev, self.prev_at, self.chunk_at = readings, read_done, read_at
        self.overhead = read_done - started
        transitions = self.alarms.links(statuses)
        extra: dict[str, list] = {}
        if slow:
            transitions += self._slow_checks(extra)
        affected = dict(self.link_owners)
        affected.update(extra)
        events = services.apply_transitions(self.fabric.pk, transitions, affected, actor=ACTOR)
        if not early:
            changed = self._publish(statuses, wall)
            published = time.monotonic()
        self._change_progress()
        self._snapshot(statuses, wall, time.monotonic() - started)
        self._accumulate(statuses)
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

    def _read_parts(self, chunks, due, extra: dict[str, Any]):
        """Each chunk's readings in turn: one stream where the reader can (the MAD helper reads
        the next part while this process handles the last), else one read per chunk."""
        lids = self.lm.switch_lids
        parts = getattr(self.reader, "read_parts", None)
        if parts is not None:
            yield from parts(chunks, lids, state=due, **extra)
            return
        for chunk in chunks:
            yield self.reader.read(chunk, lids, state=due, **extra)

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

    def _groups(self) -> list[tuple[str, set[str] | None]]:
        """Live groups and their links (None: every link)."""
        out: list[tuple[str, set[str] | None]] = [(fabric_group(self.fabric.pk), None)]
        out += [(tenant_group(tid), links) for tid, links in self.tenant_links.items()]
        return out

    def _groups_ready(self, chunks: list[dict[str, list[int]]]) -> dict[int, list[str]]:
        """chunk index → the groups whose links are all read once that chunk is."""
        chunk_of = {sw: i for i, chunk in enumerate(chunks) for sw in chunk}
        last = len(chunks) - 1
        out: dict[int, list[str]] = defaultdict(list)
        for group, links in self._groups():
            if links is None:
                at = last
            else:
                at = max(
                    (chunk_of.get(self.lm.ends[lk].switch, last) for lk in links if lk in self.lm.ends), default=last
                )
            out[at].append(group)
        return out

    def _slow_checks(self, affected: dict[str, list]) -> list:
        out = []
        if self.lab is not None:
            from console.fabric.diags.runner import DiagError
            from console.fabric.lab.routing import routing_engine_in_use

            routing = routing_engine_in_use(self.lab)
            out += self.alarms.routing(routing.configured, routing.in_use, routing.fallback)
            passes = self.lab.opensm_log.stat().st_size if self.lab.opensm_log.exists() else 0
            if self.routing_mark not in (-1, passes) and self.options.lab_traffic:
                self._refresh_routes()
            self.routing_mark = passes
            try:
                state = self.lab.diags(timeout=3).sminfo().state
            except DiagError:
                state = "NO ANSWER"
            out += self.alarms.sm_state(state)
        failures, hits = services.push_failure_transitions(self.fabric.pk, self.failures_since)
        affected.update(hits)
        return out + failures

    def _publish(self, statuses: dict[str, LinkStatus], wall: float, only: list[str] | None = None) -> int:
        """At most one delta per group per sweep, only links whose state/bucket/errors moved;
        ``only``: these groups (the others are published later in the sweep)."""
        now = time.monotonic()
        messages: list[tuple[str, dict[str, Any]]] = []
        groups: list[tuple[str, dict[str, LinkStatus]]] = []
        for group, links in self._groups():
            if only is not None and group not in only:
                continue
            subset = statuses if links is None else {k: statuses[k] for k in links if k in statuses}
            groups.append((group, subset))
        total = 0
        for group, subset in groups:
            pub = self.published[group]
            moved = changed_links(subset, pub.keys)
            if not moved and now - pub.last < KEEPALIVE_S:
                continue
            for lid in moved:
                pub.keys[lid] = subset[lid].key
            pub.last = now
            total += len(moved)
            messages.append(
                (
                    group,
                    {
                        "type": "link.delta",
                        "fabric": self.fabric.pk,
                        "at": wall,
                        "links": [subset[k].as_dict() for k in moved],
                    },
                )
            )
        publish_many(messages)
        return total

    def _change_progress(self) -> None:
        """Stream the steps of changes in flight (and their last state) to ``change.<id>``.

        The push pipeline records steps in the database; a progress hook in
        console/fabric/changes/pipeline.py calling ``publish`` would make this immediate."""
        recent = timezone.now() - dt.timedelta(seconds=30)
        ids = (
            ChangeRequest.objects.filter(fabric_id=self.fabric.pk)
            .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=recent))
            .values_list("pk", flat=True)[:20]
        )
        messages = []
        for change_id in ids:
            msg = services.change_progress(change_id)
            if msg is None:
                continue
            sig = (msg["status"], tuple((s["seq"], s["status"]) for s in msg["steps"]))
            if self.change_sigs.get(change_id) != sig:
                self.change_sigs[change_id] = sig
                messages.append((change_group(change_id), msg))
        publish_many(messages)

    def _snapshot(self, statuses: dict[str, LinkStatus], wall: float, cycle: float) -> None:
        tenants = {
            str(tid): {
                "links": sorted(links),
                "reservations": {
                    str(r.id): list(j.nodes) for r, j in self.jobs if r is not None and r.tenant_id == tid
                },
                "reservation_links": {
                    str(r.id): sorted(self.lm.links_of_nodes(set(j.nodes)))
                    for r, j in self.jobs
                    if r is not None and r.tenant_id == tid
                },
            }
            for tid, links in self.tenant_links.items()
        }
        # the seqs this snapshot is current with, read after the sweep's deltas went out
        # (store.snapshot_seq)
        seqs = current_seqs([group for group, _ in self._groups()])
        store.save_snapshot(
            self.fabric.pk,
            {
                "fabric": self.fabric.pk,
                "epoch": self.epoch,
                "at": wall,
                "cycle_s": round(cycle, 4),
                "seqs": seqs,
                "links": {k: v.as_dict() for k, v in statuses.items()},
                "tenants": tenants,
                "summary": services.summarise(statuses.values()),
            },
        )

    def _accumulate(self, statuses: dict[str, LinkStatus]) -> None:
        for lid, st in statuses.items():
            row = self.acc.setdefault(lid, [0.0, 0.0, 0.0, 0.0, 1.0, 0.0])
            row[0] += st.tx_bps
            row[1] += st.rx_bps
            row[2] += st.utilisation
            row[3] += sum(st.errors.values())
            row[4] = min(row[4], 1.0 if st.up else 0.0)
            row[5] += 1
        if time.monotonic() - self.acc_since < self.options.store_interval:
            return
        rows = {
            lid: {
                "tx_bps": r[0] / r[5],
                "rx_bps": r[1] / r[5],
                "util": r[2] / r[5],
                "errors": int(r[3]),
                "up": bool(r[4]),
            }
            for lid, r in self.acc.items()
        }
        where = {lid: (e.switch, e.tier) for lid, e in self.lm.ends.items()}
        self._store(timezone.now(), rows, where)
        self.acc, self.acc_since = {}, time.monotonic()

    def _store(self, at: dt.datetime, rows: dict, where: dict) -> None:
        """Write a history sample: in a background thread (one row per link, ~0.5 s for the
        2,048-GPU fabric, is not the sweep's business), or here on an in-memory database (a
        thread would have a database of its own)."""
        if _in_memory_db():
            services.store_samples(self.fabric.pk, at, rows, where)
            return
        if self._store_pool is None:
            self._store_pool = ThreadPoolExecutor(1, thread_name_prefix="telemetry-store")
        self._store_pool.submit(self._store_now, at, rows, where)

    def _store_now(self, at: dt.datetime, rows: dict, where: dict) -> None:
        try:
            services.store_samples(self.fabric.pk, at, rows, where)
        except DatabaseError as exc:
            log.warning("history sample of fabric %s not stored: %s", self.fabric.pk, exc)
            close_old_connections()

    # -- the loop ----------------------------------------------------------------------------

    def run(self, *, stop=lambda: False, sweeps: int | None = None) -> None:
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
        if self._store_pool is not None:
            self._store_pool.submit(connections.close_all)
            self._store_pool.shutdown(wait=True)
            self._store_pool = None
