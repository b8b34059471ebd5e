"""The live benchmark's collectors and collector-cycle measurements (``bench_live.py``): a collector
whose reservations' traffic alternates between 30 % and 90 % of line rate, the same reading the lab
from its own process (the agent window's baseline), the MAD helper's throughput and the sweep's
cycle times. Imported after ``django.setup()``."""

from __future__ import annotations

import statistics
import time

from benchutil import pct

from console.fabric.drivers.hosts import LabHost
from console.fabric.lab.fabrics import lab_for
from console.telemetry.collector import CollectorOptions, FabricCollector
from console.telemetry.traffic import Job


class AlternatingCollector(FabricCollector):
    """Reservations' jobs alternate between 30 % and 90 % of line rate every sweep."""

    def sweep(self):
        work = self.workload
        if work.jobs:
            load = 0.3 if self.sweeps % 2 else 0.9
            work.jobs = [(r, Job(j.name, j.nodes, gbps=400 * load)) for r, j in work.jobs]
            work.recompute_load(self.lm)
        return super().sweep()

    def _refresh_jobs(self):
        work = self.workload
        keep = {r.id: j for r, j in work.jobs if r is not None}
        super()._refresh_jobs()
        work.jobs = [(r, keep.get(r.id, j) if r else j) for r, j in work.jobs]


class OnTheSmHost(AlternatingCollector):
    """The same collector reading the lab from its own process, as one on the SM host itself
    would (the console before the agents): the agent window's baseline."""

    through_agent = False

    def _local_host(self):
        return LabHost(lab_for(self.fabric))


def mad_throughput(fabric, reps: int) -> dict:
    """MADs/s of the helper, synchronous against pipelined, same ports, same process."""
    from console.fabric.diags.mad import MadSession
    from console.telemetry.linkmap import build_link_map
    from designer.services import revision_graph

    lab = lab_for(fabric)
    lm = build_link_map(revision_graph(fabric.revision), lab.diags(timeout=60).ibnetdiscover())
    ports = [
        (lm.switch_lids[sw], p) for sw, plist in lm.measured_ports().items() if sw in lm.switch_lids for p in plist
    ]
    rates: dict[str, list[float]] = {"sync": [], "pipelined": []}
    same = True
    with MadSession(lab.diag_env(), timeout=60) as mad:
        mad.ping()
        for _ in range(reps):
            answers = {}
            for mode in ("sync", "pipelined"):
                answers[mode] = mad.counters(ports, mode=mode)
                stats = mad.last_stats
                rates[mode].append(stats["mads"] / stats["seconds"])
            # data counters move (MADs cross the links); errors and states must agree
            same &= all(
                (a is None) == (b is None) and (a is None or a[2:] == b[2:])
                for a, b in zip(answers["sync"], answers["pipelined"], strict=True)
            )
        pipelined = mad.pipelined
    sync, pipe = statistics.median(rates["sync"]), statistics.median(rates["pipelined"])
    return {
        "mad_ports": len(ports),
        "mad_per_s_sync": round(sync),
        "mad_per_s_pipelined": round(pipe),
        "mad_pipelined_speedup": round(pipe / sync, 2),
        "mad_answers_equal": same,
        "mad_helper_pipelined": pipelined,
    }


def cycle_times(fabric, config: dict, prefix: str = "") -> dict:
    collector = OnTheSmHost(fabric, CollectorOptions(store_interval=1e9, **config))
    collector.setup()
    times, reads, writes, mads, pubs = [], [], [], [], []
    try:
        for _ in range(11):
            report = collector.sweep()
            times.append(report.cycle_s)
            reads.append(report.read_s)
            writes.append(report.write_s)
            mads.append(report.mads)
            pubs.append(report.publish_s)
            time.sleep(0.2)
        links = report.links
    finally:
        collector.close()
    times, reads, writes, mads, pubs = times[1:], reads[1:], writes[1:], mads[1:], pubs[1:]
    return {
        f"{prefix}collector_links": links,
        f"{prefix}collector_cycle_p50_s": round(statistics.median(times), 3),
        f"{prefix}collector_cycle_p95_s": round(pct(times, 95), 3),
        f"{prefix}collector_read_p50_s": round(statistics.median(reads), 3),
        f"{prefix}collector_write_p50_s": round(statistics.median(writes), 3),
        f"{prefix}collector_publish_p50_s": round(statistics.median(pubs), 3),
        f"{prefix}collector_mads_per_sweep": round(statistics.median(mads)),
    }


def perfquery_cycle(fabric) -> float:
    pq = OnTheSmHost(fabric, CollectorOptions(reader="perfquery", lab_traffic=False, store_interval=1e9))
    pq.setup()
    pq.sweep()
    pq_s = pq.sweep().cycle_s
    pq.close()
    return round(pq_s, 3)
