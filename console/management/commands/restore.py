"""``manage.py restore --from DIR``: a backup into an empty database, every fabric paused until an
operator reviews and resumes it (console.backup, console.fabric.paused)."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from console.backup import BackupError, backup_secrets, counts, read_manifest, restore_database, secrets_differ
from console.fabric.paused import pause_all
from console.tenancy.context import Actor


class Command(BaseCommand):
    help = "Restore a backup into an empty database; fabrics stay paused until reviewed and resumed."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--from", dest="source", required=True, type=Path, help="a backup directory")
        parser.add_argument("--json", dest="as_json", action="store_true")

    def handle(self, *args: Any, source: Path, as_json: bool = False, **options: Any) -> None:
        try:
            manifest = read_manifest(source)
            restore_database(source)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        call_command("migrate", verbosity=0)  # a backup of an older release: its data, this schema
        now = counts()  # before the pause's own audit rows
        paused = pause_all(Actor.system("restore"), f"restored from the backup of {manifest['created_at']}")
        missing = {k: (v, now.get(k)) for k, v in manifest["counts"].items() if now.get(k) != v}
        unset = secrets_differ(backup_secrets(source))
        body = {"restored": manifest, "counts": now, "differences": missing, "paused": paused, "set_secrets": unset}
        if as_json:
            self.stdout.write(json.dumps(body, indent=2, sort_keys=True, default=str))
        else:
            self.stdout.write(f"restored the backup of {manifest['created_at']} from {source}")
            for name in paused:
                self.stdout.write(
                    f"  fabric {name}: paused; review with `manage.py fabric review --fabric {name}`, "
                    f"then `manage.py fabric resume --fabric {name} --confirm`"
                )
            if unset:
                names = ", ".join(line.partition("=")[0] for line in unset)
                self.stdout.write(
                    f"  this console's {names} differ from the backup's: set them as in {source}/secrets.env"
                )
        if missing:
            raise CommandError(f"restored counts differ from the backup's: {missing}")
