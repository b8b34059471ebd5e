"""Why one policy's replay used the pool less than another's on the same trace (issue 39).

Both replays run the same jobs for the same durations (without the communication model), so
the busy GPU-seconds are equal and utilisation over the busy period differs only by when the
last job ends: ``utilization_a / utilization_b = makespan_b / makespan_a``. :func:`diagnose`
names that last job in each replay, how long it waited in each, the jobs whose start moved the
most, and when the two replays first started a job differently (before that they are identical:
the divergence is where one choice of nodes sent the queue another way).
"""

from __future__ import annotations

from typing import Any

from .results import JobRecord


def _brief(record: JobRecord) -> dict[str, Any]:
    job = record.job
    return {
        "job": job.job_id,
        "gpus": job.gpus,
        "arrival_h": round(job.arrival_s / 3600, 2),
        "duration_h": round(job.duration_s / 3600, 2),
        "wait_h": round(record.wait_s / 3600, 2),
        "leaf_groups": record.leaf_groups,
    }


def diagnose(a: list[JobRecord], b: list[JobRecord], *, moved: int = 5) -> dict[str, Any]:
    """``a`` against ``b`` (two replays of one trace): the makespans, each one's last job, the
    ``moved`` jobs ``a`` started latest relative to ``b``, and the first start that differs."""
    if not a or not b:
        return {}
    first = min(r.job.arrival_s for r in a)
    by_a = {r.job.job_id: r for r in a}
    by_b = {r.job.job_id: r for r in b}
    last_a = max(a, key=lambda r: r.end)
    last_b = max(b, key=lambda r: r.end)
    shifts = sorted(((r.start - by_b[r.job.job_id].start, r) for r in a if r.job.job_id in by_b), key=lambda s: -s[0])
    ordered_a = sorted(a, key=lambda r: (r.start, r.job.job_id))
    diverged = next(
        (r for r in ordered_a if r.job.job_id in by_b and abs(r.start - by_b[r.job.job_id].start) > 1e-6),
        None,
    )
    out: dict[str, Any] = {
        "makespan_h": [round((last_a.end - first) / 3600, 2), round((max(r.end for r in b) - first) / 3600, 2)],
        "last_job": [_brief(last_a), _brief(last_b)],
        "last_job_in_other": [_brief(by_b[last_a.job.job_id]), _brief(by_a[last_b.job.job_id])],
        "started_later": [
            {**_brief(r), "later_h": round(shift / 3600, 2), "other": _brief(by_b[r.job.job_id])}
            for shift, r in shifts[:moved]
            if shift > 0
        ],
    }
    if diverged is not None:
        other = by_b[diverged.job.job_id]
        out["first_divergence"] = {
            "at_h": round((min(diverged.start, other.start) - first) / 3600, 2),
            "job": _brief(diverged),
            "other": _brief(other),
        }
    return out
