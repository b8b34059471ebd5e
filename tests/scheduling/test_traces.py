"""Trace loaders on the real published traces and on malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.replay import (
    TraceFormatError,
    load_alibaba,
    load_generic,
    load_kalos,
    load_trace,
)
from tests.datafiles import TRACES

KALOS = TRACES / "kalos_jobs.csv"
ALIBABA = TRACES / "alibaba_openb_pods.csv"


def test_kalos_sizes_and_durations():
    jobs = load_kalos(KALOS)

    assert len(jobs) == 319
    assert max(j.gpus for j in jobs) == 1024  # 128 workers x 8 GPUs
    first = next(j for j in jobs if j.job_id == "0")
    assert first.gpus == 64 and first.gpus_per_node == 8
    assert first.duration_s == pytest.approx(208 * (0.5 + 0.25))
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    assert {j.gpus for j in jobs if j.gpus_per_node != 8} == {1, 2}


def test_alibaba_drops_cpu_only_pods_and_rounds_fractions_up():
    jobs = load_alibaba(ALIBABA)

    assert len(jobs) == 8152 - 1088  # CPU-only pods dropped
    assert min(j.gpus for j in jobs) == 1
    shared = next(j for j in jobs if j.job_id == "openb-pod-0001")  # gpu_milli 460
    assert shared.gpus == 1
    assert shared.arrival_s == 427061
    assert shared.duration_s == 12902960 - 427061
    assert all(j.gpus == j.gpus_per_node for j in jobs)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def test_generic_with_optional_gpus_per_node(tmp_path):
    path = _write(tmp_path, "job_id,arrival_s,duration_s,gpus,gpus_per_node\nb,5,10,16,8\na,0,3.5,2,\n")

    jobs = load_trace(path, "generic")

    assert [j.job_id for j in jobs] == ["a", "b"]
    assert jobs[0].gpus_per_node is None and jobs[1].gpus_per_node == 8
    assert jobs[0].duration_s == 3.5


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", r"trace.csv:1: empty file"),
        ("job_id,arrival_s,gpus\n1,0,8\n", r"trace.csv:1: missing column\(s\) duration_s"),
        (
            "job_id,arrival_s,duration_s,gpus\n1,0,10,8\n2,5,ten,8\n",
            r"trace.csv:3: column 'duration_s': expected a number, got 'ten'",
        ),
        ("job_id,arrival_s,duration_s,gpus\n1,0,10,0\n", r"trace.csv:2: column 'gpus' must be"),
        ("job_id,arrival_s,duration_s,gpus\n1,-4,10,8\n", r"trace.csv:2: .*'-4' is negative"),
        ("job_id,arrival_s,duration_s,gpus\n1,0,10,2.5\n", r"trace.csv:2: .*whole number"),
        ("job_id,arrival_s,duration_s,gpus\n1,0,10\n", r"trace.csv:2: fewer cells"),
        ("job_id,arrival_s,duration_s,gpus\n1,0,10,8,9\n", r"trace.csv:2: more cells"),
        ("job_id,arrival_s,duration_s,gpus\n", r"no jobs in trace"),
        ("job_id,arrival_s,duration_s,gpus\n1,0,nan,8\n", r"trace.csv:2: .*not finite"),
    ],
)
def test_generic_malformed_input_names_line_and_column(tmp_path, text, expected):
    path = _write(tmp_path, text)

    with pytest.raises(TraceFormatError, match=expected):
        load_generic(path)


def test_kalos_malformed_row(tmp_path):
    header = (
        "job_id,arrival_time,num_iteration,iteration_computing_time,"
        "iteration_networking_time,gpu_workers,ps,gpu_per_worker\n"
    )
    path = _write(tmp_path, header + "0,0,10,0.5,0.25,8,0,8.0\n1,3,10,0.5,0.25,x,0,8.0\n")

    with pytest.raises(TraceFormatError, match=r":3: column 'gpu_workers'") as info:
        load_kalos(path)
    assert info.value.line == 3


def test_alibaba_deletion_before_start(tmp_path):
    header = "name,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n"
    path = _write(tmp_path, header + "p0,1,1000,0,50,10\np1,1,500,100,90,100\n")

    with pytest.raises(TraceFormatError, match=r":3: deletion_time 90 is before"):
        load_alibaba(path)


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="unknown trace format 'slurm'"):
        load_trace(tmp_path / "x.csv", "slurm")
    with pytest.raises(TraceFormatError, match="cannot open"):
        load_trace(tmp_path / "missing.csv", "kalos")
