"""Synthetic job traces for the replay: a published, seeded generator (plain Python).

A trace is ``jobs`` gang requests with

* **arrivals**: a Poisson process (exponential inter-arrival times) of rate ``λ``; given an
  offered ``load`` ρ relative to a pool of ``capacity_gpus``, ``λ = ρ · capacity / E[gpus · duration]``
  (sizes and durations are drawn independently, so ``E[gpus · duration] = E[gpus] · E[duration]``,
  both computed exactly from the distributions below, not from the sample). ρ = 1 offers exactly
  the pool's GPU-seconds; above 1 the queue grows without bound (saturated).
* **sizes**: GPU counts drawn from a weighted mix (:data:`DEFAULT_SIZE_MIX`: powers of two 1 to
  1,024, mostly single-node jobs by count but most GPU-hours in multi-node ones, as in the
  published Kalos and Acme characterisations). A job of more than one node's GPUs takes whole
  nodes (``gpus_per_node`` = the node size).
* **durations**: lognormal with a given median and σ, clipped to ``[min_duration_s, max_duration_s]``.
* **locality** (optional): each job's data site drawn from a weighted mix of site names
  (``-`` for "no data site"), from a random stream of its own, so adding a locality mix leaves
  every other column of a seeded trace unchanged.

The same parameters and seed always give the same rows (``random.Random(seed)``, drawn in a fixed
order). :func:`write_csv` writes the generic format :func:`scheduling.replay.load_generic` reads
(``job_id,arrival_s,duration_s,gpus,gpus_per_node``, and ``site`` with a locality mix);
``manage.py schedule trace-gen`` wraps it.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .traces import TraceJob

#: (GPUs, weight): the default job-size mix. By count 60 % of jobs fit one node; by GPU-seconds
#: jobs of 64 GPUs and more dominate.
DEFAULT_SIZE_MIX: tuple[tuple[int, float], ...] = (
    (1, 0.30),
    (2, 0.06),
    (4, 0.06),
    (8, 0.18),
    (16, 0.10),
    (32, 0.10),
    (64, 0.09),
    (128, 0.06),
    (256, 0.03),
    (512, 0.015),
    (1024, 0.005),
)

#: The loads the benchmark replays: light, half, heavy, saturated.
STANDARD_LOADS = (0.3, 0.5, 0.8, 1.0)


@dataclass(frozen=True, slots=True)
class TraceSpec:
    """Parameters of a synthetic trace (every default is the published benchmark's)."""

    jobs: int = 2000
    #: Offered load ρ relative to ``capacity_gpus`` (sets the arrival rate); ignored with ``rate``.
    load: float = 0.5
    capacity_gpus: int = 2048
    #: Poisson arrival rate in jobs per second, instead of deriving it from ``load``.
    rate: float | None = None
    size_mix: tuple[tuple[int, float], ...] = field(default=DEFAULT_SIZE_MIX)
    gpus_per_node: int = 8
    median_duration_s: float = 3600.0
    sigma: float = 1.2
    min_duration_s: float = 60.0
    max_duration_s: float = 24 * 3600.0
    seed: int = 1
    #: (site name, weight): the data-site mix; ``-`` is "no data site"; empty: no locality column.
    locality: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise ValueError("jobs must be at least 1")
        if self.rate is None and not self.load > 0:
            raise ValueError("load must be positive")
        if self.rate is not None and not self.rate > 0:
            raise ValueError("rate must be positive")
        if self.capacity_gpus < 1 or self.gpus_per_node < 1:
            raise ValueError("capacity_gpus and gpus_per_node must be positive")
        if not self.size_mix or any(g < 1 or w < 0 for g, w in self.size_mix) or sum(w for _, w in self.size_mix) <= 0:
            raise ValueError("size_mix needs positive GPU counts and non-negative weights, not all zero")
        if not (0 < self.min_duration_s <= self.median_duration_s <= self.max_duration_s) or self.sigma < 0:
            raise ValueError("durations need 0 < min <= median <= max and sigma >= 0")
        if self.locality and (
            any(not name or w < 0 for name, w in self.locality) or sum(w for _, w in self.locality) <= 0
        ):
            raise ValueError("locality needs site names and non-negative weights, not all zero")

    def mean_gpus(self) -> float:
        """E[gpus] of the size mix."""
        total = sum(w for _, w in self.size_mix)
        return sum(g * w for g, w in self.size_mix) / total

    def mean_duration_s(self) -> float:
        """E[duration] of the clipped lognormal, exactly (no sampling)."""
        return clipped_lognormal_mean(self.median_duration_s, self.sigma, self.min_duration_s, self.max_duration_s)

    def arrival_rate(self) -> float:
        """Jobs per second: ``rate``, or the one that offers ``load`` of the capacity."""
        if self.rate is not None:
            return self.rate
        return self.load * self.capacity_gpus / (self.mean_gpus() * self.mean_duration_s())


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def clipped_lognormal_mean(median: float, sigma: float, low: float, high: float) -> float:
    """E[min(max(X, low), high)] for X lognormal with ``median`` and ``sigma`` (closed form)."""
    if sigma == 0:
        return min(max(median, low), high)
    mu = math.log(median)
    a, b = (math.log(low) - mu) / sigma, (math.log(high) - mu) / sigma
    # E[X; low < X < high] = e^(mu + s²/2) (Φ(b − s) − Φ(a − s)); the tails contribute their bound.
    middle = math.exp(mu + sigma * sigma / 2) * (_phi(b - sigma) - _phi(a - sigma))
    return low * _phi(a) + middle + high * (1.0 - _phi(b))


def generate(spec: TraceSpec) -> list[TraceJob]:
    """The trace ``spec`` describes, sorted by arrival (deterministic for a given spec)."""
    rng = random.Random(spec.seed)
    rate = spec.arrival_rate()
    sizes = [g for g, _ in spec.size_mix]
    weights = [w for _, w in spec.size_mix]
    mu = math.log(spec.median_duration_s)
    jobs: list[TraceJob] = []
    # Its own stream (seeded from the trace's seed) so the other columns do not move with it.
    places = random.Random(spec.seed * 1_000_003 + 17)
    names = [name for name, _ in spec.locality]
    shares = [w for _, w in spec.locality]
    t = 0.0
    for index in range(spec.jobs):
        if index:
            t += rng.expovariate(rate)
        gpus = rng.choices(sizes, weights)[0]
        duration = min(max(rng.lognormvariate(mu, spec.sigma), spec.min_duration_s), spec.max_duration_s)
        jobs.append(
            TraceJob(
                job_id=f"syn-{index}",
                arrival_s=round(t, 3),
                duration_s=round(duration, 3),
                gpus=gpus,
                gpus_per_node=min(gpus, spec.gpus_per_node),
                site=_site(places.choices(names, shares)[0]) if names else None,
            )
        )
    return jobs


def parse_locality(text: str) -> tuple[tuple[str, float], ...]:
    """``east:0.7,west:0.2,-:0.1`` as (("east", 0.7), ("west", 0.2), ("-", 0.1))."""
    mix = []
    for item in text.split(","):
        name, sep, weight = item.rpartition(":")
        try:
            mix.append((name.strip(), float(weight)))
        except ValueError:
            raise ValueError(f"--locality item {item!r} is not SITE:WEIGHT") from None
        if not sep:
            raise ValueError(f"--locality item {item!r} is not SITE:WEIGHT")
    return tuple(mix)


def _site(name: str) -> str | None:
    return None if name == "-" else name


def offered_load(jobs: Sequence[TraceJob], capacity_gpus: int) -> float:
    """GPU-seconds asked / (capacity × arrival span): the load a trace actually offers."""
    if len(jobs) < 2:
        return 0.0
    span = jobs[-1].arrival_s - jobs[0].arrival_s
    return sum(j.gpus * j.duration_s for j in jobs) / (capacity_gpus * span) if span > 0 else math.inf


def write_csv(jobs: Iterable[TraceJob], path: str | Path) -> int:
    """Write ``jobs`` in the generic trace format (a ``site`` column when a job has a data
    site); returns the number of rows."""
    rows = list(jobs)
    located = any(job.site for job in rows)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["job_id", "arrival_s", "duration_s", "gpus", "gpus_per_node", *(["site"] if located else [])])
        for job in rows:
            row = [job.job_id, repr(job.arrival_s), repr(job.duration_s), job.gpus, job.gpus_per_node or ""]
            writer.writerow([*row, job.site or ""] if located else row)
    return len(rows)


__all__ = [
    "DEFAULT_SIZE_MIX",
    "STANDARD_LOADS",
    "TraceSpec",
    "clipped_lognormal_mean",
    "generate",
    "offered_load",
    "parse_locality",
    "write_csv",
]
