"""The tail diagnosis (issue 39): which job ended each replay, which jobs one policy started later,
and where the two replays first started a job differently."""

from __future__ import annotations

from scheduling.replay import JobRecord, TraceJob
from scheduling.replay.tail import diagnose

H = 3600.0


def record(job: TraceJob, start: float, groups: int = 1) -> JobRecord:
    return JobRecord(
        job, start, start + job.duration_s, nodes=1, leaves=1, spines=0, leaf_groups=groups, rail_aligned=True
    )


def test_the_last_job_the_later_starts_and_the_first_divergence_are_named():
    a1 = TraceJob("a1", 0, 1 * H, 8, 8)
    big = TraceJob("big", 0, 2 * H, 64, 8)
    long = TraceJob("long", 0.5 * H, 10 * H, 32, 8)
    topology = [record(a1, 0), record(big, 1 * H, 1), record(long, 3 * H)]
    first_fit = [record(a1, 0), record(big, 0.5 * H, 2), record(long, 2.5 * H)]
    found = diagnose(topology, first_fit)
    assert found["makespan_h"] == [13.0, 12.5]
    assert [j["job"] for j in found["last_job"]] == ["long", "long"]
    assert [j["wait_h"] for j in found["last_job"]] == [2.5, 2.0]
    assert [(j["job"], j["later_h"]) for j in found["started_later"]] == [("big", 0.5), ("long", 0.5)]
    assert found["first_divergence"]["job"]["job"] == "big" and found["first_divergence"]["at_h"] == 0.5
    assert found["first_divergence"]["other"]["leaf_groups"] == 2
    assert diagnose(first_fit, first_fit)["started_later"] == [] and "first_divergence" not in diagnose(
        first_fit, first_fit
    )
