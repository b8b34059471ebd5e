"""What a replay measured: one record per placed job, and the public metrics dict
(:data:`RESULT_KEYS`; the figures are described in :mod:`.simulator`)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from scheduling.placement import Policy

from .power import POWER_KEYS
from .sites import locality_summary
from .stats import percentile
from .traces import TraceJob

#: Keys of the dict :func:`replay` returns, in order (public contract for CLI and API).
RESULT_KEYS = (
    "jobs",
    "utilization",
    "goodput",
    "utilization_arrivals",
    "goodput_arrivals",
    "utilization_waiting",
    "goodput_waiting",
    "avg_wait_s",
    "p95_wait_s",
    "avg_jct_s",
    "avg_leaves_per_job",
    "avg_spines_per_job",
    "rail_aligned_fraction",
    "fragmentation",
    "decision_ms_p50",
    "decision_ms_p99",
)

#: Bookings need a non-empty window; zero-length trace jobs are given this many seconds.
MIN_DURATION_S = 1.0


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What happened to one placed job."""

    job: TraceJob
    start: float
    end: float
    nodes: int
    leaves: int
    spines: int
    leaf_groups: int
    rail_aligned: bool
    sharp: bool = False
    #: Sites the job ran on, its data site and the rule that chose (replays with sites only).
    sites: tuple[int, ...] = ()
    near: int | None = None
    site_rule: str = ""

    @property
    def wait_s(self) -> float:
        """Queueing delay."""
        return self.start - self.job.arrival_s

    @property
    def jct_s(self) -> float:
        """Job completion time: arrival to end."""
        return self.end - self.job.arrival_s


@dataclass
class ReplayResult:
    """Raw outcome of a replay; :meth:`summary` gives the public dict."""

    policy: Policy
    capacity_gpus: int
    submitted: int
    records: list[JobRecord] = field(default_factory=list)
    skipped_too_large: list[str] = field(default_factory=list)
    decision_ms: list[float] = field(default_factory=list)
    fragmentation: list[float] = field(default_factory=list)
    #: :data:`POWER_KEYS` figures under a power policy.
    energy: dict[str, float | int] | None = None
    #: Multi-node jobs that asked for SHARP (``None``: no SHARP in this replay).
    sharp_requested: set[str] | None = None
    #: Number of sites (0: a replay without sites).
    site_count: int = 0

    def summary(self) -> dict[str, Any]:
        """The public metrics dict (keys :data:`RESULT_KEYS`, in that order)."""
        records = self.records
        multi = [r for r in records if r.nodes > 1]
        waits = [r.wait_s for r in records]
        if records:
            first = min(r.job.arrival_s for r in records)
            last = max(r.end for r in records)
            busy = sum(r.job.gpus * (r.end - r.start) for r in records)
            useful = sum(r.job.gpus * max(r.job.duration_s, MIN_DURATION_S) for r in records)
            period = last - first
            utilization = busy / (self.capacity_gpus * period) if period > 0 else 0.0
            goodput = min(busy, useful) / (self.capacity_gpus * period) if period > 0 else 0.0
            arrived = max(r.job.arrival_s for r in records)
            span = arrived - first
            steady = sum(r.job.gpus * max(0.0, min(r.end, arrived) - r.start) for r in records)
            utilization_arrivals = steady / (self.capacity_gpus * span) if span > 0 else utilization
            # useful work accrues at duration / run time of each job while it runs
            work = sum(r.job.gpus * max(0.0, min(r.end, arrived) - r.start) * _useful(r) for r in records)
            goodput_arrivals = work / (self.capacity_gpus * span) if span > 0 else goodput
        else:
            utilization = utilization_arrivals = goodput = goodput_arrivals = 0.0
        utilization_waiting, goodput_waiting = while_waiting(records, self.capacity_gpus)
        # Unrounded: presentation (CLI, docs) decides the precision.
        result: dict[str, Any] = {
            "jobs": {
                "submitted": self.submitted,
                "placed": len(records),
                "skipped_too_large": len(self.skipped_too_large),
                "multi_node": len(multi),
            },
            "utilization": utilization,
            "goodput": goodput,
            "utilization_arrivals": utilization_arrivals,
            "goodput_arrivals": goodput_arrivals,
            "utilization_waiting": utilization_waiting,
            "goodput_waiting": goodput_waiting,
            "avg_wait_s": _mean(waits),
            "p95_wait_s": percentile(waits, 95),
            "avg_jct_s": _mean([r.jct_s for r in records]),
            "avg_leaves_per_job": _mean([r.leaves for r in multi]),
            "avg_spines_per_job": _mean([r.spines for r in multi]),
            "rail_aligned_fraction": (_mean([1.0 if r.rail_aligned else 0.0 for r in multi]) if multi else 1.0),
            "fragmentation": _mean(self.fragmentation),
            "decision_ms_p50": percentile(self.decision_ms, 50),
            "decision_ms_p99": percentile(self.decision_ms, 99),
        }
        if self.energy is not None:
            result |= {key: self.energy[key] for key in POWER_KEYS}
        if self.sharp_requested is not None:
            placed = [r for r in records if r.job.job_id in self.sharp_requested]
            result["sharp"] = {
                "requested": len(self.sharp_requested),
                "placed": len(placed),
                "waited": sum(1 for r in placed if r.wait_s > 0),
                "refused": len(self.sharp_requested) - len(placed),
            }
        if self.site_count:
            rows = ((r.near, r.sites, r.wait_s, r.site_rule) for r in records)
            result["locality"] = locality_summary(rows, self.site_count)
        return result


def while_waiting(records: list[JobRecord], capacity_gpus: int) -> tuple[float | None, float | None]:
    """Utilisation and goodput over the time some job waited (the union of every placed job's
    ``[arrival, start)``): the capacity the scheduler left idle, or spent on stretched runs,
    while it had work it could not start. ``(None, None)`` when no job ever waited."""
    waits = sorted((r.job.arrival_s, r.start) for r in records if r.start > r.job.arrival_s)
    spans: list[list[float]] = []
    for begin, end in waits:
        if spans and begin <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([begin, end])
    length = sum(end - begin for begin, end in spans)
    if not length > 0:
        return None, None
    begins = [begin for begin, _ in spans]
    busy = work = 0.0
    for record in records:
        index = max(0, bisect.bisect_right(begins, record.start) - 1)
        overlap = 0.0
        while index < len(spans) and spans[index][0] < record.end:
            overlap += max(0.0, min(record.end, spans[index][1]) - max(record.start, spans[index][0]))
            index += 1
        busy += record.job.gpus * overlap
        work += record.job.gpus * overlap * _useful(record)
    return busy / (capacity_gpus * length), work / (capacity_gpus * length)


def _useful(record: JobRecord) -> float:
    """The share of a job's run time that was useful work (1 unless the communication model
    stretched it)."""
    run = record.end - record.start
    return min(1.0, max(record.job.duration_s, MIN_DURATION_S) / run) if run > 0 else 1.0


def _mean(values: list[float] | list[int]) -> float:
    return float(sum(values) / len(values)) if values else 0.0
