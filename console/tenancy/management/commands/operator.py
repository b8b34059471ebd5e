"""``manage.py operator create NAME``: the first operator of a new console (and any later one).

    manage.py operator create alice                         # password prompted twice
    printf '%s\\n' "$PASSWORD" | manage.py operator create alice --password-stdin

The password is checked against the console's password rules; the user gets the operator role
(``createsuperuser`` gives a user with no role, who sees nothing). Audited as ``member.create``.
"""

from __future__ import annotations

import getpass
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.tenancy.actions import create_member
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.models import Principal, Role


class Command(BaseCommand):
    help = "Create an operator (the console's administrator role)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create an operator")
        create.add_argument("name", help="the operator's username")
        create.add_argument("--email", default="")
        create.add_argument("--password-stdin", action="store_true", help="read the password from stdin")

    def handle(self, *args: Any, name: str, email: str = "", password_stdin: bool = False, **opts: Any) -> None:
        password = self._password(password_stdin)
        try:
            create_member(
                Actor.cli(),
                Principal(None, Role.OPERATOR, None),
                username=name,
                role=Role.OPERATOR,
                tenant=None,
                email=email,
                password=password,
            )
        except ConsoleError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(f"operator {name} created: sign in at /login/")

    def _password(self, from_stdin: bool) -> str:
        if from_stdin:
            password = sys.stdin.readline().rstrip("\n")
            if not password:
                raise CommandError("no password on stdin")
            return password
        if not sys.stdin.isatty():
            raise CommandError("no terminal to prompt on: pass --password-stdin and the password on stdin")
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("the passwords differ")
        return first
