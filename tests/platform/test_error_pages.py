"""Error answers: the console's own 400/403/404/500 pages, never Django's debug pages or a
traceback; every /api/ path (undecodable ones included) answers the JSON error body; DEBUG is off
unless DEBUG=1 is set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def _debug_of(env: dict[str, str]) -> str:
    base = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "CONSOLE_ENV"}}
    code = "import console.settings as s; print(s.DEBUG)"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.smoke
def test_debug_is_off_unless_asked_for():
    assert _debug_of({}) == "False"  # the environment of `make run`: nothing set
    assert _debug_of({"DEBUG": "0"}) == "False"
    assert _debug_of({"DEBUG": "1"}) == "True"


def _assert_console_page(response, status: int) -> None:
    assert response.status_code == status
    html = response.content.decode()
    assert f'data-testid="error-page" data-status="{status}"' in html
    for leak in ("URLconf", "Traceback", "technical", "secret-internal-detail", "urlpatterns"):
        assert leak not in html


@pytest.mark.smoke
def test_unknown_pages_answer_the_console_404_without_url_patterns(member_a):
    client = Client()
    client.force_login(member_a)
    _assert_console_page(client.get("/no-such-page/"), 404)
    _assert_console_page(client.get("/tenants/"), 404)  # a page this role may not use


@pytest.mark.smoke
def test_a_forbidden_form_post_answers_the_console_403(member_a):
    client = Client(enforce_csrf_checks=True)
    client.force_login(member_a)
    _assert_console_page(client.post("/tokens/", {"name": "x"}), 403)


@pytest.mark.smoke
def test_a_bad_request_answers_the_console_400():
    _assert_console_page(Client().get("/login/", HTTP_HOST="evil.example.org"), 400)


def test_a_crash_answers_the_console_500_and_the_api_json(settings):
    settings.ROOT_URLCONF = "tests.platform.boom_urls"
    client = Client(raise_request_exception=False)
    _assert_console_page(client.get("/boom/"), 500)
    api = client.get("/api/boom/")
    assert api.status_code == 500
    assert api.json() == {"code": "server_error", "detail": "server error", "fields": {}}


@pytest.mark.smoke
@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("path", ["/api/foo%2fbar/", "/api/%ff/", "/api/nope/", "/api/%2e%2e/%2fetc", "/api/x%00y/"])
def test_every_api_path_answers_the_json_error_body(member_a, settings, path, debug):
    settings.DEBUG = debug
    client = Client()
    client.force_login(member_a)
    response = client.get(path)
    assert response.status_code == 404, response.content[:200]
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"code": "not_found", "detail": "not found", "fields": {}}


@pytest.mark.smoke
def test_api_errors_of_other_kinds_stay_json(member_a):
    client = Client()
    client.force_login(member_a)
    response = client.get("/api/me/", HTTP_HOST="evil.example.org")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
