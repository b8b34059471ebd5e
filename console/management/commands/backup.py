"""``manage.py backup --to DIR``: the database, the secrets it needs and a manifest (console.backup)."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from console.backup import BackupError, backup


class Command(BaseCommand):
    help = "Back up the console: database dump, secrets (0600) and a manifest, into a new directory."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--to", required=True, type=Path, help="a new or empty directory")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the manifest")

    def handle(self, *args: Any, to: Path, as_json: bool = False, **options: Any) -> None:
        try:
            manifest = backup(to)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(manifest, indent=2, sort_keys=True))
            return
        c = manifest["counts"]
        live = sum(c["reservations"].values())
        self.stdout.write(
            f"backed up to {to}: {c['tenants']} tenants, {c['fabrics']} fabrics, {live} reservations, "
            f"{c['audit_entries']} audit entries (secrets.env is as secret as SECRET_KEY)"
        )
