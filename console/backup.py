"""Backup and restore of a console: the PostgreSQL database (``pg_dump`` custom format), the
secrets its encrypted columns need, and a manifest (what is in it, checksums, counts).

    manage.py backup --to DIR        DIR must not exist or be empty; written 0700, secrets 0600
    manage.py restore --from DIR     into an empty database; every fabric's reconciler paused

A restore pauses every fabric (console.fabric.paused): the backup is older than the wire, and
reconciling at once would strip the P_Keys of reservations made after it. The operator reviews
(``manage.py fabric review``) and resumes (``manage.py fabric resume --confirm``) each fabric.

The secrets file holds ``SECRET_KEY`` and the configured keys (``CONSOLE_BMC_KEY``,
``CONSOLE_FABRIC_KEY``, ``CONSOLE_WEBHOOK_KEY``; empty means derived from ``SECRET_KEY``): without them the BMC
passwords, the fabrics' management keys and the webhook secrets of the restored database cannot
be decrypted. A restore under other keys says so and which lines to set.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

FORMAT = 1
DUMP, SECRETS, MANIFEST = "database.dump", "secrets.env", "manifest.json"
SECRET_NAMES = ("SECRET_KEY", "CONSOLE_BMC_KEY", "CONSOLE_FABRIC_KEY", "CONSOLE_WEBHOOK_KEY")


class BackupError(RuntimeError):
    """The backup or restore cannot go on; the message says why and what to do."""


def _pg() -> tuple[list[str], dict[str, str]]:
    """Connection arguments of pg_dump/pg_restore for the default database, and their env."""
    if connection.vendor != "postgresql":
        raise BackupError(
            "backup and restore need PostgreSQL (DATABASE_URL); an embedded console keeps its data "
            f"in {settings.DATA_DIR}: stop it and copy that directory"
        )
    db = settings.DATABASES["default"]
    args = ["-h", str(db["HOST"] or "127.0.0.1"), "-p", str(db["PORT"] or 5432), "-U", str(db["USER"])]
    env = {**os.environ, "PGPASSWORD": str(db["PASSWORD"] or "")}
    return [*args, "-d", str(db["NAME"])], env


def counts() -> dict[str, Any]:
    """What a restore must bring back, counted in the database."""
    from console.fabric.models import Fabric, FabricPartition
    from console.tenancy.models import AuditEntry, Tenant
    from scheduling.models import Reservation

    by_status = Counter(Reservation.objects.values_list("status", flat=True))
    return {
        "tenants": Tenant.objects.count(),
        "fabrics": Fabric.objects.count(),
        "partitions": FabricPartition.objects.count(),
        "reservations": dict(sorted(by_status.items())),
        "audit_entries": AuditEntry.objects.count(),
    }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def backup(to: Path) -> dict[str, Any]:
    """Write the dump, the secrets and the manifest into ``to``; returns the manifest."""
    args, env = _pg()
    if to.exists() and any(to.iterdir()):
        raise BackupError(f"{to} is not empty: back up into a new directory")
    to.mkdir(parents=True, exist_ok=True)
    to.chmod(0o700)
    done = subprocess.run(
        ["pg_dump", "-Fc", "--no-owner", "-f", str(to / DUMP), *args], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise BackupError(f"pg_dump failed: {done.stderr.strip()[-500:]}")
    secrets = to / SECRETS
    secrets.touch(mode=0o600)
    lines = ["# the keys this console's encrypted columns need; keep this file as secret as SECRET_KEY"]
    lines += [f"{name}={getattr(settings, name, '') or ''}" for name in SECRET_NAMES]
    secrets.write_text("\n".join(lines) + "\n")
    manifest = {
        "format": FORMAT,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "database": settings.DATABASES["default"]["NAME"],
        "migrations": _heads(),
        "counts": counts(),
        "files": {name: _sha256(to / name) for name in (DUMP, SECRETS)},
    }
    (to / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _heads() -> dict[str, str]:
    heads: dict[str, str] = {}
    for app, name in MigrationRecorder.Migration.objects.order_by("app", "name").values_list("app", "name"):
        heads[app] = name
    return heads


def read_manifest(source: Path) -> dict[str, Any]:
    """The manifest of a backup, its files checked against their checksums."""
    try:
        manifest = json.loads((source / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise BackupError(f"{source} holds no readable {MANIFEST}: {exc}") from None
    if manifest.get("format") != FORMAT:
        raise BackupError(f"backup format {manifest.get('format')!r} is not {FORMAT}")
    for name, digest in manifest["files"].items():
        path = source / name
        if not path.is_file() or _sha256(path) != digest:
            raise BackupError(f"{path} is missing or does not match the manifest's checksum")
    return manifest


def backup_secrets(source: Path) -> dict[str, str]:
    out = {}
    for line in (source / SECRETS).read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            out[name.strip()] = value.strip()
    return out


def restore_database(source: Path) -> None:
    """pg_restore the dump into the (empty) default database."""
    args, env = _pg()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'")
        (tables,) = cursor.fetchone() or (0,)
    if tables:
        raise BackupError(
            f"database {settings.DATABASES['default']['NAME']!r} is not empty ({tables} tables): "
            "restore into a new, empty database"
        )
    connection.close()  # pg_restore creates extensions and tables under us
    done = subprocess.run(
        ["pg_restore", "--no-owner", "--no-privileges", "--exit-on-error", *args, str(source / DUMP)],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise BackupError(f"pg_restore failed: {done.stderr.strip()[-500:]}")


def secrets_differ(saved: dict[str, str]) -> list[str]:
    """The secrets whose value here differs from the backup's: the lines to set."""
    return [f"{n}={saved.get(n, '')}" for n in SECRET_NAMES if saved.get(n, "") != (getattr(settings, n, "") or "")]
