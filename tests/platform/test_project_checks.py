"""Project hygiene that CI enforces: migrations in sync, deploy checks pass in production."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.smoke
def test_no_missing_migrations(db):
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_check_deploy_passes_with_production_settings():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"} | {
        "CONSOLE_ENV": "production",
        "SECRET_KEY": "k8-very-long-and-random-" + "Zq7!" * 12,
        "ALLOWED_HOSTS": "console.example.org",
        "DEBUG": "0",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_refuses_to_start_without_secret_key():
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"} | {"CONSOLE_ENV": "production"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_demo_seed_is_idempotent(db):
    from console.demo import seed_all
    from console.tenancy.models import AuditEntry, Membership, Tenant

    first = seed_all()
    counts = (Tenant.objects.count(), Membership.objects.count(), AuditEntry.objects.count())
    assert first, "first seed created nothing"
    assert seed_all() == []
    assert (
        Tenant.objects.count(),
        Membership.objects.count(),
        AuditEntry.objects.count(),
    ) == counts


def test_ruff_lint_and_format_are_clean():
    for args in (["check", "."], ["format", "--check", "."]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stdout + result.stderr
