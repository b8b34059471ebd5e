"""Benchmark of the ibnetdiscover import: parse + infer + graph, and ``manage.py design import`` end to end.

    .venv/bin/python tests/benchmarks/bench_import.py [--repeat 5] [--no-cli]

With a database (not ``--no-cli``) it also times the API with a large dump (a 2,000-node fat
tree, about 9 MB): the request answers 202 with a job (nothing parsed in it), and the job, run
as a worker runs it, takes the seconds the request would otherwise have held a web thread for.

The dump: a 3-level fat tree of 250 generic nodes (2,000 HCAs) on 40-port QM8700 switches (280
switch ASICs), its 80 cores rewritten as the spine ASICs of one CS8500 director, and a SHARP
Aggregation Node on an extra port of every switch (as real Quantum fabrics show): about 1.4 MB.
Prints per-step medians, then ONE JSON line. Targets: parse+infer < 1 s and < 300 MB peak
(ru_maxrss of a child process that only imports), the CLI end to end < 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from designer.builtin_catalogue import DEFAULT_CATALOGUE
from designer.exports import export
from designer.imports import import_fabric
from designer.plan import plan
from tests.ibnetdiscover_rewrites import with_aggregation_nodes

ROOT = Path(__file__).resolve().parents[2]
TARGET_S = 1.0
TARGET_MB = 300
TARGET_CLI_S = 3.0
OPTIONS = {"topology": "fat-tree", "nodes": 250, "levels": "3", "switch": "QM8700", "node_type": "generic"}


def make_dump() -> str:
    """The designed fabric exported, rewritten into director form, with Aggregation Nodes."""
    graph = plan(OPTIONS).graph
    text = export(graph, "ibnetdiscover")[0]
    chassis = 0x0002C9AAAA000000
    for i, sw in enumerate(s for s in graph.switches.values() if s.tier == "core"):
        text = text.replace(
            f"sysimgguid=0x{sw.guid:016x}\nswitchguid=0x{sw.guid:016x}({sw.guid:x})",
            f"sysimgguid=0x{chassis:x}\nswitchguid=0x{chassis:x}({sw.guid:x})",
        )
        text = text.replace(f'"MF0;{sw.name}:MQM8700/U1"', f'"MF0;dir1:MCS8500/S{i + 1:02d}/U1"')
    return with_aggregation_nodes(text, lid=9)[0]


def child_peak_mb(path: str) -> float:
    """ru_maxrss of a fresh interpreter that imports the dump once (the whole process, in MB)."""
    code = (
        f"import resource, sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from designer.builtin_catalogue import DEFAULT_CATALOGUE\n"
        "from designer.imports import import_fabric\n"
        f"import_fabric(open({path!r}).read(), DEFAULT_CATALOGUE)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return int(out.strip()) / 1024


def cli_seconds(path: str) -> float:
    """``manage.py design import`` wall time (process start to exit), its design deleted after."""
    name = f"bench-import-{os.getpid()}"
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], check=True, cwd=ROOT)
    t0 = time.perf_counter()
    subprocess.run(
        [*manage, "design", "import", "--file", path, "--name", name, "--json"],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - t0
    subprocess.run(
        [*manage, "shell", "-c", f"from designer.models import Design; Design.objects.filter(name={name!r}).delete()"],
        check=True,
        cwd=ROOT,
    )
    return elapsed


LARGE = {"topology": "fat-tree", "nodes": 1800, "levels": "3", "switch": "QM8700", "node_type": "generic"}


def api_seconds(repeat: int) -> dict[str, float]:
    """Median seconds of ``POST /api/designs/import/`` with a 9 MB dump (202, a job) and of that
    job run as a worker runs it (:func:`designer.import_jobs.run`); every design and job deleted."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from console.tenancy import actions
    from console.tenancy.context import Actor
    from console.tenancy.models import Membership, Principal, Role
    from designer import import_jobs
    from designer.models import Design, ImportJob

    text = export(plan(LARGE).graph, "ibnetdiscover")[0]
    user, _ = User.objects.get_or_create(username=f"bench-import-{os.getpid()}")
    Membership.objects.get_or_create(user=user, defaults={"role": Role.OPERATOR})
    _, token = actions.issue_token(Actor.for_user(user), Principal.of(user), user=user, name="bench")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    requests, jobs = [], []
    try:
        for i in range(repeat):
            t0 = time.perf_counter()
            answer = client.post("/api/designs/import/", {"name": f"bench-large-{i}", "text": text}, format="json")
            requests.append(time.perf_counter() - t0)
            assert answer.status_code == 202, answer.content[:200]
            t0 = time.perf_counter()
            job = import_jobs.run(answer.json()["id"])
            jobs.append(time.perf_counter() - t0)
            assert job is not None and job.state == "done", job and job.error
    finally:
        Design.objects.filter(name__startswith="bench-large-").delete()
        ImportJob.objects.filter(name__startswith="bench-large-").delete()
        user.delete()
    return {
        "dump_mb": round(len(text) / 1e6, 2),
        "request_s": statistics.median(requests),
        "job_s": statistics.median(jobs),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI (no database)")
    args = parser.parse_args()
    text = make_dump()
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        result = import_fabric(text, DEFAULT_CATALOGUE)
        times.append(time.perf_counter() - t0)
    report = result.report()
    median = statistics.median(times)
    print(
        f"dump: {len(text) / 1e6:.2f} MB, {report['switches']} switches, {report['hcas']} HCAs, "
        f"{report['aggregation_nodes']} Aggregation Nodes, {report['links']} links, {report['levels']} levels"
    )
    print(f"parse+infer+graph median {median:.3f} s (min {min(times):.3f}, {args.repeat} runs)")
    with tempfile.NamedTemporaryFile("w", suffix=".topo", delete=False) as fh:
        fh.write(text)
    try:
        peak = child_peak_mb(fh.name)
        print(f"peak memory (child ru_maxrss) {peak:.0f} MB")
        cli = None if args.no_cli else cli_seconds(fh.name)
        large = None if args.no_cli else api_seconds(3)
        if cli is not None and large is not None:
            print(f"CLI end to end {cli:.2f} s")
            print(
                f"API, {large['dump_mb']} MB dump: request (202, a job) {large['request_s']:.2f} s, "
                f"the job {large['job_s']:.2f} s (medians of 3)"
            )
    finally:
        os.unlink(fh.name)
    ok = median < TARGET_S and peak < TARGET_MB and (cli is None or cli < TARGET_CLI_S)
    print(
        json.dumps(
            {
                "bench": "import",
                "dump_mb": round(len(text) / 1e6, 2),
                "switches": report["switches"],
                "hcas": report["hcas"],
                "aggregation_nodes": report["aggregation_nodes"],
                "links": report["links"],
                "parse_infer_median_s": round(median, 3),
                "peak_mb": round(peak),
                "cli_s": round(cli, 2) if cli is not None else None,
                "large_dump_mb": large and large["dump_mb"],
                "large_request_s": large and round(large["request_s"], 3),
                "large_job_s": large and round(large["job_s"], 2),
                "large_request_per_job": large and round(large["request_s"] / large["job_s"], 3),
                "targets": {"parse_infer_s": TARGET_S, "peak_mb": TARGET_MB, "cli_s": TARGET_CLI_S},
                "ok": ok,
            }
        )
    )


if __name__ == "__main__":
    main()
