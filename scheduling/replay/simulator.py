"""Trace replay in simulated time through the real placement engine.

Queueing is FIFO with EASY backfill, the console's own queue pass
(:func:`scheduling.placement.queue.queue_pass`): at every arrival or completion the queue is scanned in
order; a job that fits now starts now; the first job that does not fit (the head) gets a
reservation at its earliest window, booked in the engine as a future booking; later jobs then
start only if they fit now *around* that reservation (the engine refuses anything that would
overlap it), so backfilling never delays the head. Only one reservation is held at a time.

Both policies run this same loop on the same topology; only the engine's node choice differs.

Metrics (the public contract of :func:`replay`):

* ``jobs``: counts: ``submitted``, ``placed``, ``skipped_too_large`` (larger than the eligible
  fabric, never placeable), ``multi_node``.
* ``utilization``: busy GPU-seconds / (fabric GPUs × busy period), the busy period running from
  the first arrival to the last completion.
* ``goodput``: the useful GPU-seconds — each job's trace duration, however long it ran — over the
  same capacity and period; equal to ``utilization`` unless the communication model
  (:attr:`ReplayOptions.comm`, :mod:`.comm`) stretches jobs by the tier their traffic crosses.
* ``utilization_arrivals``: the same over the arrival period only (first to last arrival, busy
  time clipped to it): the steady-state figure, without the drain after the last arrival, where a
  single long job's start decides the busy period (and so ``utilization``) of a whole replay.
* ``goodput_arrivals``: useful work over the arrival period (a stretched job's run counts at
  duration / run time).
* ``utilization_waiting``, ``goodput_waiting``: the same over the time some job waited (the
  union of every job's arrival-to-start): how much of the pool a policy keeps busy, and with
  useful work, while it has work it cannot start. This is the figure a placement policy answers
  for; on a finite trace the busy period's ends (the drain after the last arrival, where the pool
  empties whatever the policy) weigh on ``utilization`` by when the single last job happens to
  start. ``None`` when no job waited.
* ``avg_wait_s``, ``p95_wait_s`` (nearest rank), ``avg_jct_s`` (completion − arrival).
* ``avg_leaves_per_job``, ``avg_spines_per_job``: over multi-node jobs; leaves are the distinct
  leaves of the HCAs used, spines those the job's traffic may traverse (0 inside one leaf group).
* ``rail_aligned_fraction``: multi-node jobs whose every node is rail-aligned (alignment only
  matters for traffic between nodes); 1.0 when there is no multi-node job.
* ``fragmentation``: mean over placement decisions, sampled just before each, of
  ``1 − largest free leaf-group block / min(total free GPUs, one group's capacity)``
  (see :meth:`PlacementEngine.fragmentation`).
* ``decision_ms_p50``, ``decision_ms_p99``: wall time of each placement call (including failed
  attempts and earliest-window searches for reservations).

With SHARP jobs (a trace's ``sharp`` column, or :attr:`ReplayOptions.sharp_share`) the engine gets
the SHARP guard over :attr:`ReplayOptions.sharp_trees`, and the dict gains ``sharp``:
``requested`` (multi-node jobs asking for SHARP; a one-node job reduces over NVLink and asks for
no tree), ``placed``, ``waited`` (placed after a wait) and ``refused`` (never placed: no tree
could ever serve them).

With sites (:attr:`ReplayOptions.sites`, :mod:`.sites`) every job is held to the site the console's
site choice gives it at arrival (near its trace's data site, with the replay's patience), and the
dict gains ``locality``: ``sites``, ``jobs_with_data_site``, ``at_data_site`` (the fraction of
those run wholly at their data's site), ``spanning`` (fraction of placed jobs on several sites),
``wait_by_where`` (jobs, average and p95 wait of the jobs run at their data's site, at another
site, spanning, or with no data site), ``rules`` (jobs per rule of the choice) and, from the same
trace replayed with no data sites, ``baseline_avg_wait_s``, ``baseline_p95_wait_s`` and the wait
locality cost: ``locality_wait_cost_s`` and ``locality_p95_cost_s`` (this run minus baseline).
A job no single site can hold, and not allowed to span, counts in ``skipped_too_large``.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from scheduling.placement import Owner, PlacementEngine, Policy, PoolTopology, Request
from scheduling.placement.queue import PassMetrics, QueuedJob, queue_pass
from scheduling.placement.sharp import Sharp, SharpLedger, SharpTrees

from .comm import CommModel
from .power import FAR, PowerModel, PowerSettings, wait_deltas
from .results import MIN_DURATION_S, JobRecord, ReplayResult
from .sites import ReplaySites, SitePlanner, locality_cost
from .traces import TraceJob


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """Knobs of the simulation loop (defaults suit the shipped traces)."""

    #: Queued jobs examined per scheduling pass (like Slurm's ``bf_max_job_test``).
    backfill_depth: int = 256
    #: Replay only the first N jobs (by arrival) when set.
    max_jobs: int | None = None
    #: Patience: seconds a multi-node job waits for a packed placement (one leaf group, else one
    #: pod) before it accepts a wider one; 0 takes the best placement available at once.
    max_wait_s: float = 0.0
    #: Power policy (:mod:`.power`): idle nodes go off, jobs wait for boots; adds energy figures.
    power: PowerSettings | None = None
    #: Fraction of the multi-node jobs that ask for SHARP (spread evenly by arrival), beside the
    #: jobs the trace marks.
    sharp_share: float = 0.0
    #: SHARP trees per switch by the engine's key (a design's ``NamedTopology.sharp_trees``).
    sharp_trees: Mapping[str, int] | None = None
    #: Sites of the fabric (:mod:`.sites`): jobs go near their data site; adds ``locality``.
    sites: ReplaySites | None = None
    #: Jobs may span sites when no one site can start them within their patience.
    span_sites: bool = False
    #: Jobs run longer the higher the tier their traffic crosses (:mod:`.comm`); ``None``: as long
    #: wherever they are placed.
    comm: CommModel | None = None
    #: Once every job has arrived, the queue runs longest first (the drain of a finite trace, whose
    #: order decides its makespan; a measurement of the trace's end, not a policy of the console).
    drain_longest_first: bool = False


def replay(
    trace_jobs: Iterable[TraceJob],
    topology: PoolTopology,
    policy: Policy | str = Policy.TOPOLOGY,
    options: ReplayOptions | None = None,
) -> dict[str, Any]:
    """Replay ``trace_jobs`` on ``topology`` with ``policy``; returns the public metrics dict.

    With a power policy in ``options`` the trace is also replayed without it, and the dict gains
    :data:`POWER_KEYS` and :data:`WAIT_DELTA_KEYS` (after :data:`RESULT_KEYS`).
    """
    jobs = list(trace_jobs)
    options = options or ReplayOptions()
    result = simulate(jobs, topology, policy, options).summary()
    if options.power is not None:
        baseline = simulate(jobs, topology, policy, replace(options, power=None)).summary()
        result |= wait_deltas(baseline, result)
    if options.sites is not None:
        plain = [replace(job, site=None) for job in jobs]
        baseline = simulate(plain, topology, policy, options).summary()
        result["locality"] |= locality_cost(result, baseline)
    return result


def simulate(
    trace_jobs: Iterable[TraceJob],
    topology: PoolTopology,
    policy: Policy | str = Policy.TOPOLOGY,
    options: ReplayOptions | None = None,
) -> ReplayResult:
    """Run the event loop and keep every record (for tests and detailed reports)."""
    return _Simulation(list(trace_jobs), topology, Policy(policy), options or ReplayOptions()).run()


class _Simulation:
    """One replay: the queue, the single EASY reservation and the measurements."""

    def __init__(
        self,
        jobs: list[TraceJob],
        topology: PoolTopology,
        policy: Policy,
        options: ReplayOptions,
    ) -> None:
        if options.sites is not None:
            topology = options.sites.apply(topology)
        ordered = sorted(enumerate(jobs), key=lambda item: (item[1].arrival_s, item[0]))
        self.jobs = [job for _, job in ordered][: options.max_jobs]
        self.options = options
        start = self.jobs[0].arrival_s if self.jobs else 0.0
        wants_sharp = options.sharp_share > 0 or any(isinstance(c, Sharp) for j in self.jobs for c in j.constraints)
        guards = [SharpTrees(SharpLedger(options.sharp_trees or {}))] if wants_sharp else []
        self.engine = PlacementEngine(topology, now=start, policy=policy, guards=guards)
        self.result = ReplayResult(policy, topology.total_gpus, len(self.jobs))
        self.result.sharp_requested = set() if wants_sharp else None
        self._multi_seen = 0
        self.queue: deque[tuple[QueuedJob, TraceJob]] = deque()
        self.metrics = PassMetrics(self.result.decision_ms, self.result.fragmentation)
        self.reserved_start: float | None = None
        #: The head's reservation while it has not started: (its queue entry, its record).
        self.reserved: tuple[tuple[QueuedJob, TraceJob], JobRecord] | None = None
        self._owner = Owner(tenant="replay")
        self.power = PowerModel(options.power, self.engine) if options.power is not None else None
        self.planner: SitePlanner | None = None
        if options.sites is not None:
            self.result.site_count = len(options.sites.map)
            self.planner = SitePlanner(
                options.sites, self.engine, patience=options.max_wait_s, span_sites=options.span_sites
            )
        #: Per queued job key: its data site and the rule that chose its site.
        self.site_of: dict[str, tuple[int | None, str]] = {}
        #: (when, job key): jobs the communication model ends before their booked time limit.
        self.early: list[tuple[float, str]] = []
        self.early_end: dict[str, float] = {}  # job key → its early end (absent: cancelled)

    def run(self) -> ReplayResult:
        engine = self.engine
        state = engine.state
        jobs = self.jobs
        index = 0
        # (with jobs ending early, the head's reservation may still be moved forward)
        while index < len(jobs) or self.queue or (self.reserved is not None and self.early):
            next_arrival = jobs[index].arrival_s if index < len(jobs) else math.inf
            next_event = state.next_event_time()
            t = min(next_arrival, next_event if next_event is not None else math.inf, self._next_deadline())
            if self.early:
                t = min(t, self.early[0][0])
            if self.power is not None:
                t = min(t, self.power.next_event(state.now))
            if math.isinf(t):
                break  # queue left with jobs that can never fit (cannot happen after pre-check)
            engine.advance(max(t, state.now))
            freed = False
            while self.early and self.early[0][0] <= state.now:
                when, key = heapq.heappop(self.early)
                if self.early_end.get(key) == when:
                    del self.early_end[key]
                    engine.release(key)  # ended before its time limit
                    freed = True
            if freed:
                self._replan_reservation()
            while index < len(jobs) and jobs[index].arrival_s <= state.now:
                self._admit(index, jobs[index])
                index += 1
                if index == len(jobs) and self.options.drain_longest_first:
                    self.queue = deque(sorted(self.queue, key=lambda entry: -entry[0].duration))
            if self.reserved_start is not None and self.reserved_start <= state.now:
                self.reserved_start = self.reserved = None  # the head's reservation has started
            self._power_tick()
            self._schedule()
            self._power_tick()
        if self.power is not None:
            self._power_finish()
        return self.result

    def _replan_reservation(self) -> None:
        # Jobs ended before their time limits (the communication model): the head's reservation,
        # made against those limits, may start sooner. As a scheduler does when a job ends, it is
        # dropped and the head goes back to the front of the queue for this pass.
        if self.reserved is None or self.reserved_start is None or self.reserved_start <= self.engine.now:
            return
        entry, record = self.reserved
        key = entry[0].key
        self.engine.release(key)
        self.early_end.pop(key, None)
        self.result.records.remove(record)
        self.queue.appendleft(entry)
        self.reserved_start = self.reserved = None

    def _power_tick(self) -> None:
        if self.power is not None:
            self.power.tick(self.engine.now, (queued.gpus for queued, _ in self.queue))

    def _power_finish(self) -> None:
        # Run the power model on to the last completion (the loop stops at the last start), then
        # account energy over the busy period.
        assert self.power is not None
        records = self.result.records
        end = max((r.end for r in records), default=self.engine.now)
        state = self.engine.state
        while True:
            pending = state.next_event_time()
            t = min(pending if pending is not None else math.inf, self.power.next_event(state.now))
            if t > end:
                break
            self.engine.advance(max(t, state.now))
            self._power_tick()
        busy_gpu_s = sum(r.job.gpus * (r.end - r.start) for r in records)
        self.result.energy = self.power.summary(end, busy_gpu_s)

    def _next_deadline(self) -> float:
        # A queued job's patience running out is an event too: it may now take a wider placement.
        if self.options.max_wait_s <= 0:
            return math.inf
        now = self.engine.now
        ends = (q.submitted + q.max_wait for q, _ in self.queue)
        return min((t for t in ends if t > now), default=math.inf)

    def _duration(self, job: TraceJob) -> float:
        """What a job asks for: its trace duration, stretched to the communication model's time
        limit for a multi-node job."""
        duration = max(job.duration_s, MIN_DURATION_S)
        comm = self.options.comm
        per = job.gpus_per_node or max(n.gpus for n in self.engine.topology.nodes)
        if comm is None or job.gpus <= per:
            return duration
        return duration * comm.limit(-(-job.gpus // per), len(self.engine.topology.pods))

    def _request(self, job: TraceJob, start: float) -> Request:
        duration = self._duration(job)
        return Request(
            gpus=job.gpus,
            gpus_per_node=job.gpus_per_node,
            start=start,
            end=start + duration,
            constraints=job.constraints,
            owner=self._owner,
        )

    def _admit(self, index: int, job: TraceJob) -> None:
        engine = self.engine
        request = self._request(job, engine.now)
        shape = engine.shape(request)
        if shape is None or shape.nodes > engine.eligibility(request, shape.gpus_per_node).nodes:
            self.result.skipped_too_large.append(job.job_id)
            return
        if self.result.sharp_requested is not None and shape.nodes > 1:
            job, request = self._sharp(job, request)
        duration = self._duration(job)
        key = f"job-{index}"
        if self.planner is not None:
            assert self.options.sites is not None
            near = self.options.sites.index(job.site) if job.site else None
            decision = self.planner.decide(request, near, duration)
            if decision is None:
                self.result.skipped_too_large.append(job.job_id)
                return
            request = replace(request, constraints=(*request.constraints, decision.constraint))
            self.site_of[key] = (near, decision.rule)
        # A gang split over sites has spent its patience on that choice: it does not then wait
        # for one leaf group too.
        patience = 0.0 if self.site_of.get(key, (None, ""))[1] == "span" else self.options.max_wait_s
        queued = QueuedJob(key, request, duration, job.arrival_s, patience, job.gpus)
        self.queue.append((queued, job))

    def _sharp(self, job: TraceJob, request: Request) -> tuple[TraceJob, Request]:
        # The share picks every multi-node job whose running count crosses a whole number.
        share = self.options.sharp_share
        self._multi_seen += 1
        chosen = math.floor(self._multi_seen * share) > math.floor((self._multi_seen - 1) * share)
        marked = any(isinstance(c, Sharp) for c in job.constraints)
        if chosen and not marked:
            job = replace(job, constraints=(*job.constraints, Sharp()))
            request = replace(request, constraints=job.constraints)
        if chosen or marked:
            assert self.result.sharp_requested is not None
            self.result.sharp_requested.add(job.job_id)
        return job, request

    def _schedule(self) -> None:
        # The console's queue pass (scheduling.placement.queue), with EASY backfill: at most one
        # reservation, for the head, held until it starts.
        items = list(self.queue)[: self.options.backfill_depth]
        decisions = queue_pass(
            self.engine,
            [queued for queued, _ in items],
            reservations=1 if self.reserved_start is None else 0,
            metrics=self.metrics,
        )
        done = set()
        for decision in decisions:
            placed = decision.placement
            if placed is None:
                continue
            if self.power is not None and placed.start >= FAR:
                # Reserved behind powered-off nodes only (power-ons held back by the rate limit):
                # no real window; the job stays queued for the next pass.
                self.engine.state.release(decision.job.key)
                continue
            if decision.estimated_start is not None:
                self.reserved_start = placed.start
            done.add(decision.job.key)
            entry = items[decision.position - 1]
            job = entry[1]
            end = placed.end
            if self.options.comm is not None:
                end = min(end, placed.start + max(job.duration_s, MIN_DURATION_S) * self.options.comm.stretch(placed))
                if end < placed.end:
                    heapq.heappush(self.early, (end, decision.job.key))
                    self.early_end[decision.job.key] = end
            near, rule = self.site_of.pop(decision.job.key, (None, ""))
            nodes = self.engine.topology.nodes
            sites = tuple(sorted({nodes[n].site for n in placed.node_ids})) if self.planner is not None else ()
            record = JobRecord(
                job=job,
                start=placed.start,
                end=end,
                nodes=len(placed.node_ids),
                leaves=len(placed.leaves),
                spines=len(placed.spines),
                leaf_groups=len(placed.leaf_groups),
                rail_aligned=placed.rail_aligned,
                sharp=bool(placed.sharp),
                sites=sites,
                near=near,
                site_rule=rule,
            )
            self.result.records.append(record)
            if decision.estimated_start is not None:
                self.reserved = (entry, record)
        if done:
            self.queue = deque(item for item in self.queue if item[0].key not in done)
