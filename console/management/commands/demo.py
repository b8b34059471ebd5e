"""``manage.py demo seed``: create the demo data that is missing (idempotent)."""

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from console.demo import DEMO_ACCOUNTS, DEMO_PASSWORD, seed_all


class Command(BaseCommand):
    help = "Seed the demo (idempotent) and list the demo accounts."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("action", choices=["seed", "accounts"])
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, action: str, json: bool = False, **options: Any) -> None:
        created = seed_all() if action == "seed" else []
        accounts = [
            {"username": a.username, "password": DEMO_PASSWORD, "role": a.role, "note": a.note} for a in DEMO_ACCOUNTS
        ]
        if json:
            self.stdout.write(_dumps({"created": created, "accounts": accounts}))
            return
        for line in created:
            self.stdout.write(f"created {line}")
        if action == "seed" and not created:
            self.stdout.write("demo data already present, nothing to add")


def _dumps(value: object) -> str:
    return json.dumps(value, indent=None)
