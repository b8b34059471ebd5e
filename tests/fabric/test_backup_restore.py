"""Backup, restore, and the reconciler paused until an operator has seen what the restored state
changes on the wire.

A real lab behind its agent: a reservation is pushed, the console is backed up (pg_dump), a second
reservation is pushed after the backup; the backup is restored into a new, empty database and the
restored console (subprocesses on that database, asking the same agent through the same channel
layer, as an agent reconnecting to it would answer) must not strip the second reservation's
P_Key until an operator confirms. The wire is read from the SM host's own partitions file.
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from console.fabric import changes
from console.fabric.models import ChangeRequest
from scheduling.services import quotas
from tests.fabric import agent_fixtures
from tests.fabric.agent_fixtures import ACTOR, OPERATOR
from tests.fabric.agent_fixtures import apply_as_worker as apply
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import book, whole_lab_pool

lab_data_dir = agent_fixtures.lab_data_dir
lab_fabric = agent_fixtures.lab_fabric
su1_revision = agent_fixtures.su1_revision

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(300), pytest.mark.django_db(transaction=True)]


def sql(url: str, query: str, *params: object) -> list[tuple]:
    """An independent reading of a database: plain SQL, not the console's code."""
    with psycopg.connect(url) as conn:
        return conn.execute(query, params or None).fetchall()


def here() -> str:
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def manage(url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``manage.py`` of the restored console: its own database, the same broker and channel layer.
    The lab's agent stays connected to the test's console; reconnected to the restored one it
    would be heard from there too, so its rows there are kept as fresh as its heartbeats."""
    if sql(url, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'fabric_fabricagent'")[0][0]:
        with psycopg.connect(url) as conn:
            conn.execute("UPDATE fabric_fabricagent SET last_seen = now() WHERE connected")
    env = {**os.environ, "DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        input=stdin,
    )


def pushed(fabric) -> ChangeRequest:
    change = changes.reconcile(fabric, actor=ACTOR)
    assert change is not None
    change = apply(change.pk)
    assert change.status == ChangeRequest.Status.APPLIED, (change.error, change.outcome)
    return change


COUNT_RESERVATIONS = "SELECT status, count(*) FROM scheduling_reservation GROUP BY status ORDER BY status"


def test_a_restore_brings_everything_back_and_strips_nothing_until_confirmed(
    lab_fabric, tenant_a, empty_database, tmp_path
):
    fabric, lab = lab_fabric("restore")
    pool = whole_lab_pool(fabric)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    before = book(pool, tenant_a, 16, "before-backup")
    pushed(fabric)

    backup = tmp_path / "backup"
    call_command("backup", "--to", str(backup), stdout=io.StringIO())
    at_backup = sql(here(), COUNT_RESERVATIONS)
    audit_at_backup = sql(here(), "SELECT count(*) FROM tenancy_auditentry")[0][0]
    assert stat.S_IMODE((backup / "secrets.env").stat().st_mode) == 0o600
    assert f"SECRET_KEY={settings.SECRET_KEY}" in (backup / "secrets.env").read_text()
    with pytest.raises(CommandError, match="not empty"):
        call_command("backup", "--to", str(backup), stdout=io.StringIO())

    after = book(pool, tenant_a, 16, "after-backup")  # made after the backup: the restore does not know it
    pushed(fabric)
    files = lab.store_of("primary")
    on_wire = files.read("partitions.conf") or ""
    assert f"{after.pkey:#06x}" in on_wire and f"{before.pkey:#06x}" in on_wire

    # a tampered backup is refused; then the restore into a new, empty database
    url = empty_database("restored")
    dump = (backup / "database.dump").read_bytes()
    (backup / "database.dump").write_bytes(dump[:-1] + bytes([dump[-1] ^ 1]))
    refused = manage(url, "restore", "--from", str(backup))
    assert refused.returncode != 0 and "checksum" in refused.stderr
    (backup / "database.dump").write_bytes(dump)
    done = manage(url, "restore", "--from", str(backup), "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert fabric.name in report["paused"] and report["differences"] == {}
    # everything the backup held is back, and nothing made after it
    assert sql(url, COUNT_RESERVATIONS) == at_backup
    named = "SELECT count(*) FROM scheduling_reservation WHERE name = %s"
    assert sql(url, named, after.name) == [(0,)] and sql(url, named, before.name) == [(1,)]
    # its audit: the backup's rows, and one per fabric paused
    paused_rows = sql(url, "SELECT count(*) FROM tenancy_auditentry WHERE action = 'fabric.paused'")[0][0]
    assert sql(url, "SELECT count(*) FROM tenancy_auditentry")[0][0] == audit_at_backup + paused_rows
    assert paused_rows == len(report["paused"])
    assert sql(url, "SELECT paused_at IS NOT NULL FROM fabric_fabric WHERE name = %s", fabric.name) == [(True,)]
    # restoring again over it is refused: the database is no longer empty
    again = manage(url, "restore", "--from", str(backup))
    assert again.returncode != 0 and "not empty" in again.stderr

    # paused: no push, by the reconciler or by an operator; the wire keeps the newer P_Key
    refused = manage(url, "fabric", "apply", "--fabric", fabric.name)
    assert refused.returncode != 0 and "paused since a restore" in refused.stderr
    tick = manage(
        url,
        "shell",
        "-c",
        "from console.fabric.models import Fabric; from console.fabric.changes import reconcile; "
        "from console.tenancy.context import Actor; "
        f"print(reconcile(Fabric.objects.get(name='{fabric.name}'), actor=Actor.system('tick')))",
    )
    assert tick.returncode == 0 and tick.stdout.split()[-1] == "None", tick.stderr[-2000:]
    assert files.read("partitions.conf") == on_wire

    # the review reads the wire through the agent: resuming would remove the newer P_Key
    review = manage(url, "fabric", "review", "--fabric", fabric.name, "--json")
    assert review.returncode == 0, review.stderr[-2000:]
    seen = json.loads(review.stdout)
    assert seen["wire_read"] and seen["paused"]
    assert seen["would_remove"] == [f"{after.pkey:#06x}"] and seen["would_add"] == []
    assert f"{before.pkey:#06x}" in seen["wire_pkeys"] and f"{after.pkey:#06x}" in seen["wire_pkeys"]
    unconfirmed = manage(url, "fabric", "resume", "--fabric", fabric.name)
    assert unconfirmed.returncode != 0 and f"{after.pkey:#06x}" in unconfirmed.stderr
    assert files.read("partitions.conf") == on_wire

    # confirmed: resumed (audited), and the restored state is pushed through the agent
    resumed = manage(url, "fabric", "resume", "--fabric", fabric.name, "--confirm", "--json")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    answer = json.loads(resumed.stdout)
    assert answer["resumed"] is True and answer["held_changes"] == []
    assert sql(url, "SELECT count(*) FROM tenancy_auditentry WHERE action = 'fabric.resumed'") == [(1,)]
    # its change, as a worker of the restored console applies it: the files are written again
    # (the console's own applied state already said so: its status may be "unchanged")
    push = manage(
        url,
        "shell",
        "-c",
        "from console.fabric.changes.pipeline import apply_change; "
        f"c = apply_change({answer['change']}, worker_id='restored'); "
        "print(c.steps.get(name='swap').log, c.status)",
    )
    assert push.returncode == 0, push.stderr[-3000:]
    assert push.stdout.split()[-1] in ("applied", "unchanged") and "replaced partitions.conf" in push.stdout
    now = files.read("partitions.conf") or ""
    assert f"{after.pkey:#06x}" not in now and f"{before.pkey:#06x}" in now
