"""Job-trace loaders for the replay simulator: Kalos, Alibaba OpenB and a generic CSV.

Every loader returns :class:`TraceJob` rows sorted by arrival and raises :class:`TraceFormatError`
naming the file, the 1-based line (the header is line 1) and the column on malformed input.

Traces (both CC BY 4.0, credit them with results):

* **kalos** — Shanghai AI Laboratory's Kalos cluster, from InternLM/AcmeTrace (Hu et al., NSDI
  2024). ``duration = num_iteration × (iteration_computing_time + iteration_networking_time)``;
  ``gpus = gpu_workers × gpu_per_worker``; a worker is a node's share, so
  ``gpus_per_node = gpu_per_worker``.
* **alibaba** — alibaba/clusterdata cluster-trace-gpu-v2023 (Weng et al., ATC 2023).
  ``arrival = creation_time``; ``duration = deletion_time − scheduled_time`` (``creation_time``
  when never scheduled: a pending pod held its claim on the queue for its whole life).
  Fractional GPUs (``gpu_milli < 1000``) are rounded **up to one whole GPU**: reservations hand
  out GPUs exclusively (a GPU belongs to one tenant's partition), so sharing is not modelled.
  CPU-only pods (``num_gpu = 0``) are dropped. No pod spans nodes: ``gpus_per_node = num_gpu``.
* **generic** — ``job_id,arrival_s,duration_s,gpus`` with optional ``gpus_per_node``,
  ``sharp`` (``1``: the job asks for SHARP, :mod:`scheduling.placement.sharp`) and ``site`` (or
  ``data_site``: the site of the job's data, a site name of the replay, :mod:`.sites`) columns.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from scheduling.placement import Constraint
from scheduling.placement.sharp import Sharp

FORMATS = ("kalos", "alibaba", "generic")


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job to replay: it arrives, asks for ``gpus`` for ``duration_s``, all or nothing,
    under its placement ``constraints`` (objects of :mod:`scheduling.placement`'s protocol; the
    loaders give none)."""

    job_id: str
    arrival_s: float
    duration_s: float
    gpus: int
    gpus_per_node: int | None = None
    constraints: tuple[Constraint, ...] = ()
    #: The site of the job's data (a site name of the replay), or ``None``.
    site: str | None = None


class TraceFormatError(ValueError):
    """A trace file that cannot be read; the message names file, line and column."""

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line


class _Row:
    """Typed access to one CSV row with errors that point at the cell."""

    def __init__(self, path: str | Path, line: int, row: dict[str, str]) -> None:
        self.path, self.line, self.row = path, line, row

    def text(self, column: str) -> str:
        value = self.row.get(column)
        if value is None:
            raise TraceFormatError(self.path, self.line, f"column {column!r} is missing")
        return value.strip()

    def number(self, column: str, *, optional: bool = False) -> float | None:
        raw = self.text(column)
        if raw == "" and optional:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise TraceFormatError(self.path, self.line, f"column {column!r}: expected a number, got {raw!r}") from None
        if not math.isfinite(value):
            raise TraceFormatError(self.path, self.line, f"column {column!r}: {raw!r} is not finite")
        if value < 0:
            raise TraceFormatError(self.path, self.line, f"column {column!r}: {raw!r} is negative")
        return value

    def integer(self, column: str, *, optional: bool = False) -> int | None:
        value = self.number(column, optional=optional)
        if value is None:
            return None
        if value != int(value):
            raise TraceFormatError(self.path, self.line, f"column {column!r}: expected a whole number, got {value:g}")
        return int(value)

    def positive_int(self, column: str) -> int:
        value = self.integer(column)
        assert value is not None
        if value < 1:
            raise TraceFormatError(self.path, self.line, f"column {column!r} must be at least 1")
        return value

    def required(self, column: str) -> float:
        value = self.number(column)
        assert value is not None
        return value


def _rows(path: str | Path, required: tuple[str, ...]) -> Iterator[_Row]:
    try:
        handle = open(path, newline="", encoding="utf-8")
    except OSError as exc:
        raise TraceFormatError(path, None, f"cannot open: {exc.strerror}") from None
    with handle:
        reader = csv.DictReader(handle)
        try:
            header = reader.fieldnames
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TraceFormatError(path, 1, f"unreadable header: {exc}") from None
        if not header:
            raise TraceFormatError(path, 1, "empty file (expected a CSV header)")
        missing = [c for c in required if c not in {h.strip() for h in header}]
        if missing:
            raise TraceFormatError(path, 1, f"missing column(s) {', '.join(missing)}; header is {','.join(header)}")
        try:
            for row in reader:
                # reader.line_num is the physical line just read (header = 1).
                if None in row:
                    raise TraceFormatError(path, reader.line_num, "more cells than header columns")
                cleaned = {k.strip(): v for k, v in row.items() if k is not None}
                if all(v is None or not v.strip() for v in cleaned.values()):
                    continue  # blank line
                if any(v is None for v in cleaned.values()):
                    raise TraceFormatError(path, reader.line_num, "fewer cells than header columns")
                yield _Row(path, reader.line_num, cleaned)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TraceFormatError(path, reader.line_num, f"malformed CSV: {exc}") from None


def _sorted(jobs: list[TraceJob], path: str | Path) -> list[TraceJob]:
    if not jobs:
        raise TraceFormatError(path, None, "no jobs in trace")
    return sorted(jobs, key=lambda j: j.arrival_s)


def load_kalos(path: str | Path) -> list[TraceJob]:
    """Load the Kalos trace (AcmeTrace in simulator format)."""
    required = (
        "job_id",
        "arrival_time",
        "num_iteration",
        "iteration_computing_time",
        "iteration_networking_time",
        "gpu_workers",
        "gpu_per_worker",
    )
    jobs = []
    for row in _rows(path, required):
        per_worker = row.positive_int("gpu_per_worker")
        duration = row.required("num_iteration") * (
            row.required("iteration_computing_time") + row.required("iteration_networking_time")
        )
        jobs.append(
            TraceJob(
                job_id=row.text("job_id"),
                arrival_s=row.required("arrival_time"),
                duration_s=duration,
                gpus=row.positive_int("gpu_workers") * per_worker,
                gpus_per_node=per_worker,
            )
        )
    return _sorted(jobs, path)


def load_alibaba(path: str | Path) -> list[TraceJob]:
    """Load Alibaba OpenB pods (fractional GPUs rounded up to 1; CPU-only pods dropped)."""
    required = ("name", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time")
    jobs = []
    for row in _rows(path, required):
        num_gpu = row.integer("num_gpu")
        assert num_gpu is not None
        milli = row.integer("gpu_milli", optional=True) or 0
        if num_gpu == 0:
            continue
        if milli > 1000:
            raise TraceFormatError(row.path, row.line, f"column 'gpu_milli': {milli} > 1000")
        created = row.required("creation_time")
        deleted = row.required("deletion_time")
        scheduled = row.number("scheduled_time", optional=True)
        began = created if scheduled is None else scheduled
        if deleted < began:
            raise TraceFormatError(row.path, row.line, f"deletion_time {deleted:g} is before the pod started")
        jobs.append(
            TraceJob(
                job_id=row.text("name"),
                arrival_s=created,
                duration_s=deleted - began,
                gpus=num_gpu,
                gpus_per_node=num_gpu,
            )
        )
    return _sorted(jobs, path)


def load_generic(path: str | Path) -> list[TraceJob]:
    """Load ``job_id,arrival_s,duration_s,gpus[,gpus_per_node][,sharp][,site|data_site]``."""
    jobs = []
    for row in _rows(path, ("job_id", "arrival_s", "duration_s", "gpus")):
        per_node = None
        if "gpus_per_node" in row.row:
            per_node = row.integer("gpus_per_node", optional=True)
            if per_node is not None and per_node < 1:
                raise TraceFormatError(row.path, row.line, "column 'gpus_per_node' must be >= 1")
        site = (row.row.get("site") or row.row.get("data_site") or "").strip()
        sharp = row.row.get("sharp", "").strip()
        if sharp not in ("", "0", "1"):
            raise TraceFormatError(row.path, row.line, f"column 'sharp' must be 0 or 1, got {sharp!r}")
        jobs.append(
            TraceJob(
                job_id=row.text("job_id"),
                arrival_s=row.required("arrival_s"),
                duration_s=row.required("duration_s"),
                gpus=row.positive_int("gpus"),
                gpus_per_node=per_node,
                constraints=(Sharp(),) if sharp == "1" else (),
                site=site or None,
            )
        )
    return _sorted(jobs, path)


LOADERS: dict[str, Callable[[str | Path], list[TraceJob]]] = {
    "kalos": load_kalos,
    "alibaba": load_alibaba,
    "generic": load_generic,
}


def load_trace(path: str | Path, fmt: str = "generic") -> list[TraceJob]:
    """Load ``path`` in format ``kalos``, ``alibaba`` or ``generic``."""
    try:
        loader = LOADERS[fmt]
    except KeyError:
        raise ValueError(f"unknown trace format {fmt!r}; expected one of {FORMATS}") from None
    return loader(path)
