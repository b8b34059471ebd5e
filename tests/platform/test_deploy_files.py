"""The deployment files say what runs: every unit's command line is one the console accepts.

``deploy/systemd/*.service`` are read here as systemd would (``ExecStart=``), and each command is
checked against the real thing: an ``ibconsole agent|manage …`` line against the command's own
argument parser, a gunicorn/uvicorn/celery line against the module it names."""

from __future__ import annotations

import importlib
import shlex
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

ROOT = Path(__file__).resolve().parents[2]
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))


def exec_start(unit: Path) -> list[str]:
    lines = unit.read_text().replace("\\\n", " ").splitlines()
    (line,) = [line for line in lines if line.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def test_there_is_a_unit_per_process_of_the_guide():
    names = {u.name for u in UNITS}
    for process in ("web", "asgi", "worker@", "beat", "collector", "agent"):
        assert f"ibconsole-{process}.service" in names
    guide = (ROOT / "docs" / "deploy.md").read_text()
    assert all(name.removesuffix(".service").rstrip("@") in guide for name in names)


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_each_units_command_is_one_the_console_accepts(unit):
    argv = exec_start(unit)
    program = Path(argv[0]).name
    if program == "ibconsole":
        if argv[1] == "agent":
            name, args = "agent", argv[2:]
        else:
            assert argv[1] == "manage"
            name, args = argv[2], argv[3:]
        command = load_command_class(get_commands()[name], name)
        command.create_parser("ibconsole", name).parse_args(args)  # exits on an unknown flag
    elif program in ("gunicorn", "uvicorn"):
        module, attribute = next(a for a in argv[1:] if ":" in a and not a.startswith("-")).split(":")
        assert hasattr(importlib.import_module(module), attribute)
    else:
        assert program == "celery" and argv[1:3] == ["-A", "console"]
        assert argv[3] in ("worker", "beat")
