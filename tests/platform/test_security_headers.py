"""Security headers: a strict Content-Security-Policy on every page (no 'unsafe-inline'), the
other headers kept, and `check --deploy` clean in production mode."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "console" / "web" / "templates"
pytestmark = pytest.mark.django_db


def _policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {d.split()[0]: d.split()[1:] for d in (part.strip() for part in header.split(";")) if d}


@pytest.mark.smoke
@pytest.mark.parametrize("path", ["/login/", "/", "/reservations/", "/live/", "/api/docs/", "/api/me/"])
def test_every_answer_carries_a_strict_policy(operator, path):
    client = Client()
    if path != "/login/":
        client.force_login(operator)
    response = client.get(path)
    assert response.status_code == 200
    policy = _policy(response)
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in response["Content-Security-Policy"]
    assert "'unsafe-eval'" not in response["Content-Security-Policy"]
    # the other headers are kept
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


def test_templates_have_no_inline_script_or_style():
    for template in TEMPLATES.rglob("*.html"):
        html = template.read_text()
        assert " style=" not in html, template
        assert "<style" not in html, template
        assert not re.search(r"\son[a-z]+=", html), template  # onclick= and friends
        for tag in re.findall(r"<script[^>]*>", html):
            pytest.fail(f"{template}: inline script {tag}")  # bundles come from {% vite_asset %}


def test_check_deploy_is_clean_in_production_mode(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "DATABASE_URL", "REDIS_URL"}}
    env.update(
        CONSOLE_ENV="production",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="console.example.org",
        CSRF_TRUSTED_ORIGINS="https://console.example.org",
        CONSOLE_DATA_DIR=str(tmp_path),
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
