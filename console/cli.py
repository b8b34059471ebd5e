"""``ibconsole``: the installed package's command (``pip install .``).

    ibconsole agent --console URL --fabric NAME …   the agent on a subnet-manager host
    ibconsole manage <command> …                    any ``manage.py`` command
    ibconsole up                                    the console's processes (``manage.py up``)

The settings module is ``console.settings`` unless ``DJANGO_SETTINGS_MODULE`` says otherwise; an
agent needs no database or broker settings (only ``IBCONSOLE_AGENT_TOKEN`` or ``--token-file``).
"""

from __future__ import annotations

import os
import sys

USAGE = __doc__ or ""


def manage_argv(*args: str) -> list[str]:
    """The argv that runs a ``manage.py`` command in a child process, from a checkout or an
    installed package alike (no manage.py needed)."""
    return [sys.executable, "-m", "console.cli", "manage", *args]


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from django.core.management import execute_from_command_line

    command, rest = args[0], args[1:]
    if command == "manage":
        execute_from_command_line(["ibconsole manage", *rest])
    elif command in ("agent", "up"):
        execute_from_command_line(["ibconsole", command, *rest])
    else:
        sys.stderr.write(f"ibconsole: unknown command {command!r}\n\n{USAGE}")
        raise SystemExit(2)


if __name__ == "__main__":
    main()
