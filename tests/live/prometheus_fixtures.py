"""A real Prometheus (Debian's ``prometheus``) for the monitoring tests: started once per module
on a free loopback port with its own storage, a generated ``prometheus.yml`` that scrapes the
console every 2 s with the ``METRICS_TOKEN`` bearer token and loads the shipped alert rules,
and killed at the end. A test points it at its own console with :meth:`Prometheus.point_at` (a
file_sd targets file Prometheus re-reads), so one Prometheus serves every test of the module."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.servers import ROOT, _free_port

RULES = ROOT / "deploy" / "prometheus" / "ibconsole.rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "ibconsole.rules.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "ibconsole.json"
#: The bearer token the module's consoles accept on /metrics (their METRICS_TOKEN) and Prometheus sends.
TOKEN = secrets.token_urlsafe(24)

CONFIG = """\
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: ibconsole
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: {token}
    file_sd_configs:
      - files: [{targets}]
        refresh_interval: 1s
"""


def promtool(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shutil.which("promtool") or "promtool", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def http_get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@dataclass
class Prometheus:
    url: str
    targets: Path
    log: Path

    def point_at(self, console_url: str) -> None:
        """Scrape ``console_url`` (and nothing else) from now on."""
        host = urllib.parse.urlsplit(console_url).netloc
        tmp = self.targets.with_suffix(".tmp")
        tmp.write_text(json.dumps([{"targets": [host], "labels": {"console": "test"}}]))
        tmp.replace(self.targets)

    def api(self, path: str, **params: str) -> dict[str, Any]:
        status, body = http_get(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}")
        answer: dict[str, Any] = json.loads(body)
        answer["http_status"] = status
        return answer

    def query(self, expr: str) -> dict[str, Any]:
        """``/api/v1/query``'s whole answer (``status`` is ``success`` or ``error``)."""
        return self.api("query", query=expr)

    def poll(self, expr: str, until: Callable[[list[dict[str, Any]]], bool], timeout: float = 60) -> list[dict]:
        """The instant vector of ``expr`` once ``until(vector)`` holds; fails after ``timeout`` s
        with the last answer."""
        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            last = self.query(expr)
            if last.get("status") == "success" and until(last["data"]["result"]):
                return list(last["data"]["result"])
            time.sleep(0.5)
        targets = self.api("targets")
        raise AssertionError(f"{expr}: not as expected within {timeout}s; last {last}; targets {targets}")


def _ready(url: str) -> bool:
    try:
        return http_get(f"{url}/-/ready")[0] == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    work = tmp_path_factory.mktemp("prometheus")
    (work / "token").write_text(TOKEN)
    targets = work / "targets.json"
    targets.write_text("[]")
    config = work / "prometheus.yml"
    config.write_text(CONFIG.format(rules=RULES, token=work / "token", targets=targets))
    port = _free_port()
    log = work / "prometheus.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                shutil.which("prometheus") or "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            cwd=work,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Prometheus(f"http://127.0.0.1:{port}", targets, log)
    try:
        deadline = time.monotonic() + 30
        while not _ready(server.url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"Prometheus did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        yield server
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
