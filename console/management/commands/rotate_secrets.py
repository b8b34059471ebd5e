"""``manage.py rotate_secrets``: re-encrypt every stored secret under the current keys
(console.secret_rotation)."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from console.secret_rotation import rotate
from console.tenancy.context import Actor
from console.tenancy.crypto import CredentialError


class Command(BaseCommand):
    help = "Re-encrypt BMC passwords, fabric keys and webhook secrets under the current keys."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--json", dest="as_json", action="store_true")

    def handle(self, *args: Any, as_json: bool = False, **options: Any) -> None:
        try:
            done = rotate(Actor.system("rotate_secrets"))
        except CredentialError as exc:  # nothing written: one transaction
            raise CommandError(f"{exc}; nothing was rewritten") from None
        if as_json:
            self.stdout.write(json.dumps(done, sort_keys=True))
        else:
            self.stdout.write(", ".join(f"{n} {what.replace('_', ' ')}" for what, n in done.items()) + " re-encrypted")
