"""Upgrading from the previous release: its code (the commit CHANGELOG.md names, from this
repository's history) migrates a new database, seeds the demo and adds a reservation of every
status; this code then migrates the same database. Every row is still there, and the console
answers the same about every tenant, member, fabric, site, pool, quota, reservation (P_Key
included), dataset, design, event and audit entry — fields this release added aside, and the
answers CHANGELOG.md says changed.

Both releases' answers are taken by tests/upgrade/probe.py, run with each release's own code
(the API as the demo's operator, every page, and a count of every table).
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.needs import needs

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
#: Tables that may grow: Django's own bookkeeping of the new migrations and models.
GROWS = {"django_migrations", "django_content_type", "auth_permission"}
#: (endpoint, field) whose answer changed on purpose, as CHANGELOG.md says.
CHANGED = {
    ("reservations", "progress"): "a reservation waiting for its fabric says it waits for the SM host's agent",
    ("sites", "reachability"): "a site's reachability names an SM host that does not answer",
}

EVERY_STATUS = (
    "requested",
    "queued",
    "placed",
    "provisioning",
    "ready",
    "ending",
    "released",
    "rejected",
    "preempted",
    "cancelled",
)

pytestmark = [needs("postgresql"), pytest.mark.timeout(600)]


def previous_release() -> str:
    """The commit of the newest release CHANGELOG.md names."""
    text = (ROOT / "CHANGELOG.md").read_text()
    found = re.search(r"^## (\d+\.\d+\.\d+) — \S+, commit ([0-9a-f]{40})$", text, re.M)
    assert found, "CHANGELOG.md names no released commit"
    return found.group(2)


def run(code: Path, url: str, data: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST"))}
    env.update(DATABASE_URL=url, CONSOLE_DATA_DIR=str(data), PYTHONPATH=str(code))
    done = subprocess.run([sys.executable, *args], cwd=code, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(args)} in {code}:\n{done.stderr[-3000:]}"
    return done.stdout


def test_an_upgrade_from_the_previous_release_keeps_every_row_and_every_answer(empty_database, tmp_path):
    commit = previous_release()
    old = tmp_path / "release"
    old.mkdir()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, timeout=120)
    assert archive.returncode == 0, f"commit {commit} is not in this clone's history: {archive.stderr[-500:]!r}"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(old, filter="data")
    url, data = empty_database("upgrade"), tmp_path / "data"

    run(old, url, data, "manage.py", "migrate", "-v", "0")
    run(old, url, data, "manage.py", "demo", "seed")
    statuses = ast.literal_eval(run(old, url, data, str(HERE / "populate.py")).strip().splitlines()[-1])
    assert set(statuses) == set(EVERY_STATUS)
    before = json.loads(run(old, url, data, str(HERE / "probe.py")))

    run(ROOT, url, data, "manage.py", "migrate", "-v", "0")
    after = json.loads(run(ROOT, url, data, str(HERE / "probe.py")))

    for table, count in before["counts"].items():
        if table in GROWS:
            assert after["counts"][table] >= count, table
        else:
            assert after["counts"].get(table) == count, (
                f"{table}: {count} rows before, {after['counts'].get(table)} after"
            )
    assert sum(before["counts"].values()) > 500  # a populated database, not an empty one
    differences = []
    for endpoint, items in before["answers"].items():
        now = {item["id"]: item for item in after["answers"][endpoint]}
        assert set(now) == {item["id"] for item in items}, endpoint
        if endpoint != "telemetry/events":  # the demo's lab has not run: no events yet
            assert items, f"nothing to compare at /api/{endpoint}/"
        for item in items:
            for field, value in item.items():
                if (endpoint, field) in CHANGED:
                    continue
                if field not in now[item["id"]] or now[item["id"]][field] != value:
                    differences.append(f"{endpoint} {item['id']} {field}: {value!r} -> {now[item['id']].get(field)!r}")
    assert differences == []
    pkeys = {r["name"]: r["pkey"] for r in before["answers"]["reservations"] if r["pkey"]}
    assert pkeys and pkeys == {r["name"]: r["pkey"] for r in after["answers"]["reservations"] if r["pkey"]}
