"""The collector: one loop per fabric — drive the lab's traffic, read counters, compute, alarm,
publish coalesced deltas, store samples.

Run it as its own process (``manage.py collector``), as a thread of the embedded web process
(``manage.py up`` without Redis) or, as a fallback, one sweep at a time from Celery beat.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone

from console.fabric.models import ChangeRequest, Fabric
from console.live.notify import change_group, fabric_group, publish_many, tenant_group
from console.telemetry import services, store
from console.telemetry.alarms import AlarmEngine, AlarmRules
from console.telemetry.core import LinkStatus, PortReading, changed_links, sweep_status
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


@dataclass
class _Published:
    keys: dict[str, tuple[bool, int, bool]] = field(default_factory=dict)
    last: float = 0.0


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
        self.alarms = AlarmEngine(AlarmRules(settings.TELEMETRY_ERROR_OPEN,
                                             settings.TELEMETRY_ERROR_CLEAR,
                                             settings.TELEMETRY_ERROR_CLEAR_SWEEPS))  # fmt: skip
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
            reader = MadReader(env)
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
            jobs = [(r, Job(f"res-{r.id}", r.nodes)) for r in
                    services.ready_reservations(self.fabric.pk)]  # fmt: skip
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
            values[key] = (before.xmit_words + words(self.load.xmit.get(key, 0.0), seconds),
                           before.rcv_words + words(self.load.rcv.get(key, 0.0), seconds))  # fmt: skip
        if values:
            console_batch(self.lab, counter_commands(self.node_ids, values))
        return len(values)

    # -- one sweep ---------------------------------------------------------------------------

    def sweep(self) -> SweepReport:
        """Drive traffic (lab), read, compute, alarm, publish, store."""
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
        readings = self.reader.read(self.lm.measured_ports(), self.lm.switch_lids)
        read_done = time.monotonic()
        dt_s = read_done - self.prev_at if self.prev_at else 0.0
        statuses = sweep_status(self.lm.ends.values(), readings, self.prev, dt_s)
        self.prev, self.prev_at = readings, read_done
        self.overhead = read_done - started
        transitions = self.alarms.links(statuses)
        extra: dict[str, list] = {}
        if slow:
            transitions += self._slow_checks(extra)
        affected = dict(self.link_owners)
        affected.update(extra)
        events = services.apply_transitions(self.fabric.pk, transitions, affected, actor=ACTOR)
        changed = self._publish(statuses, wall)
        self._change_progress()
        self._snapshot(statuses, wall, time.monotonic() - started)
        self._accumulate(statuses)
        store.heartbeat(self.fabric.pk, max(5.0, self.options.interval * 5))
        self.sweeps += 1
        self.last_statuses = statuses
        return SweepReport(time.monotonic() - started, read_done - written, written - started,
                           len(statuses), changed, len(events), ports_written)  # fmt: skip

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

    def _publish(self, statuses: dict[str, LinkStatus], wall: float) -> int:
        """At most one delta per group per sweep, only links whose state/bucket/errors moved."""
        now = time.monotonic()
        messages: list[tuple[str, dict[str, Any]]] = []
        groups: list[tuple[str, dict[str, LinkStatus]]] = [(fabric_group(self.fabric.pk), statuses)]
        for tid, links in self.tenant_links.items():
            groups.append((tenant_group(tid), {k: statuses[k] for k in links if k in statuses}))
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
            messages.append((group, {"type": "link.delta", "fabric": self.fabric.pk, "at": wall,
                                     "links": [subset[k].as_dict() for k in moved]}))  # fmt: skip
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
            str(tid): {"links": sorted(links),
                       "reservations": {str(r.id): list(j.nodes) for r, j in self.jobs
                                        if r is not None and r.tenant_id == tid},
                       "reservation_links": {str(r.id): sorted(self.lm.links_of_nodes(set(j.nodes)))
                                             for r, j in self.jobs
                                             if r is not None and r.tenant_id == tid}}
            for tid, links in self.tenant_links.items()
        }  # fmt: skip
        store.save_snapshot(self.fabric.pk, {
            "fabric": self.fabric.pk, "epoch": self.epoch, "at": wall, "cycle_s": round(cycle, 4),
            "links": {k: v.as_dict() for k, v in statuses.items()},
            "tenants": tenants, "summary": services.summarise(statuses.values()),
        })  # fmt: skip

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
        rows = {lid: {"tx_bps": r[0] / r[5], "rx_bps": r[1] / r[5], "util": r[2] / r[5],
                      "errors": int(r[3]), "up": bool(r[4])} for lid, r in self.acc.items()}  # fmt: skip
        where = {lid: (e.switch, e.tier) for lid, e in self.lm.ends.items()}
        services.store_samples(self.fabric.pk, timezone.now(), rows, where)
        self.acc, self.acc_since = {}, time.monotonic()

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
