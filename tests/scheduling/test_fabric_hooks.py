"""Scheduling registers with the fabric's hooks in ``ready()``, in every process.

The fabric never imports scheduling; it learns the reservations' partitions and tells scheduling
what it verified only through what ``SchedulingConfig.ready()`` registered. A process that set
Django up without it (a management command, a worker) would push fabrics without reservation
partitions and never mark a reservation ready.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from console.fabric import hooks
from scheduling import fabric_hooks

ROOT = Path(__file__).resolve().parents[2]


def test_this_process_has_schedulings_provider_and_listener():
    assert hooks.registry.partitions_providers["scheduling"] is fabric_hooks.desired_reservation_partitions
    listener = hooks.registry.change_listeners["scheduling"]
    assert listener.on_verified is fabric_hooks.on_fabric_verified
    assert listener.on_failed is fabric_hooks.on_fabric_failed


def test_registering_again_replaces_instead_of_adding():
    fabric_hooks.register()
    assert list(hooks.registry.partitions_providers) == ["scheduling"]
    # scheduling's listener, and telemetry's (it audits the fabric's isolation after a push)
    assert sorted(hooks.registry.change_listeners) == ["scheduling", "telemetry.isolation"]


def test_a_management_command_process_has_them_too():
    code = "from console.fabric import hooks; r = hooks.registry; print(sorted(r.partitions_providers), sorted(r.change_listeners))"
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "['scheduling'] ['scheduling', 'telemetry.isolation']" in out.stdout
