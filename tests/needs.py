"""What a test needs from the machine, and whether a run may do without it.

A test marked ``@needs("lab")`` is skipped where the lab tools are missing (a developer's laptop)
and fails instead when the run demands them with ``CONSOLE_REQUIRE_LAB=1``. ``scripts/test.sh``
demands everything the bootstrap installs or CI always provides, so there a skip would be a broken
environment passing as green. The hooks in ``tests/conftest.py`` apply it; a test marked ``lab``
needs the lab whether or not it says so. ``@needs("slurm")`` (Debian's slurmctld and scontrol, which
``bootstrap.sh --test`` installs with the lab's packages) is demanded by ``CONSOLE_REQUIRE_LAB=1`` too.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass

import pytest

#: Debian's prometheus package: the server the monitoring tests scrape with, and promtool.
PROMETHEUS_TOOLS = ("prometheus", "promtool")
LAB_TOOLS = ("ibsim", "opensm", "ibnetdiscover", "smpquery", "saquery", "sminfo", "perfquery", "ibportstate")
#: Debian's slurmctld and slurm-client: the Slurm controller the topology exports are loaded into.
SLURM_TOOLS = ("slurmctld", "scontrol")


def _lab_present() -> bool:
    from console.fabric.lab.spec import LabError, find_umad2sim

    if any(shutil.which(tool) is None for tool in LAB_TOOLS):
        return False
    try:
        find_umad2sim()
    except LabError:
        return False
    return True


def _slurm_present() -> bool:
    return all(shutil.which(tool, path=f"{os.environ.get('PATH', '')}:/usr/sbin") for tool in SLURM_TOOLS)


def _postgresql() -> bool:
    from django.db import connection

    return connection.vendor == "postgresql"


def _ldap_present() -> bool:
    """A real slapd to sign in against (Debian's slapd, ldap-utils) and the ``ldap`` extra."""
    try:
        import django_auth_ldap  # noqa: F401
        import ldap  # noqa: F401
    except ImportError:
        return False
    return all(shutil.which(tool, path=f"{os.environ.get('PATH', '')}:/usr/sbin") for tool in ("slapd", "slapadd"))


def _prometheus_present() -> bool:
    return all(shutil.which(tool) is not None for tool in PROMETHEUS_TOOLS)


@dataclass(frozen=True)
class Need:
    """Something a test needs from the machine: how to tell it is there, and what is missing if not."""

    name: str
    missing: str
    present: Callable[[], bool]
    #: the need whose variable demands this one too (a tool the bootstrap installs with the lab's)
    demanded_with: str = ""

    @property
    def variable(self) -> str:
        """The environment variable that makes a run demand it (``CONSOLE_REQUIRE_LAB``)."""
        return f"CONSOLE_REQUIRE_{(self.demanded_with or self.name).upper()}"

    @property
    def demanded(self) -> bool:
        """True when this run must not skip for lack of it."""
        return os.environ.get(self.variable, "") == "1"


NEEDS = {
    need.name: need
    for need in (
        Need("lab", "the lab tools (opensm, ibsim-utils, infiniband-diags)", _lab_present),
        Need("postgresql", "PostgreSQL (DATABASE_URL)", _postgresql),
        Need("slurm", "Slurm's slurmctld and scontrol (slurmctld, slurm-client)", _slurm_present, demanded_with="lab"),
        # bootstrap.sh --test installs it beside the lab tools: CONSOLE_REQUIRE_LAB=1 demands it
        Need("prometheus", "Debian's prometheus package (prometheus, promtool)", _prometheus_present, "lab"),
        # bootstrap.sh --test installs slapd and the ldap extra beside the lab tools
        Need("ldap", "slapd and ldap-utils, and the ldap extra (django-auth-ldap, python-ldap)", _ldap_present, "lab"),
    )
}


def needs(name: str) -> pytest.MarkDecorator:
    """Mark a test as needing ``name`` (one of :data:`NEEDS`)."""
    if name not in NEEDS:
        raise ValueError(f"unknown need {name!r}; known: {sorted(NEEDS)}")
    return pytest.mark.needs(name)


def needs_of(item: pytest.Item) -> list[Need]:
    """What ``item`` needs: its ``needs`` marks, plus the lab for a test marked ``lab``."""
    names = {mark.args[0] for mark in item.iter_markers("needs")}
    if item.get_closest_marker("lab") is not None:
        names.add("lab")
    return [NEEDS[name] for name in sorted(names)]


_present: dict[str, bool] = {}


def check(item: pytest.Item) -> None:
    """Before ``item`` runs: skip it for a missing need, or fail it when the run demands that need."""
    for need in needs_of(item):
        if need.name not in _present:
            _present[need.name] = need.present()
        if _present[need.name]:
            continue
        if need.demanded:
            pytest.fail(f"needs {need.missing}, and {need.variable}=1 says this run must have it", pytrace=False)
        pytest.skip(f"needs {need.missing}")


class Tally:
    """Which selected tests of each demanded need passed: a run that demands a need fails when
    such tests were selected and none passed (all skipped from inside, say), which the check
    before each test cannot see."""

    def __init__(self) -> None:
        self.selected: dict[str, set[str]] = {}
        self.passed: set[str] = set()

    def collected(self, items: list[pytest.Item]) -> None:
        """Note the selected tests of every demanded need."""
        for item in items:
            for need in needs_of(item):
                if need.demanded:
                    self.selected.setdefault(need.name, set()).add(item.nodeid)

    def report(self, report: pytest.TestReport) -> None:
        """Note a test whose call phase passed."""
        if report.when == "call" and report.passed:
            self.passed.add(report.nodeid)

    def unmet(self) -> list[str]:
        """One line per demanded need none of whose selected tests passed."""
        return [
            f"{NEEDS[name].variable}=1 but none of the {len(ids)} selected tests needing {NEEDS[name].missing} passed"
            for name, ids in sorted(self.selected.items())
            if not ids & self.passed
        ]
