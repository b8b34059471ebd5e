"""tests/needs.py: Debian's prometheus, which the bootstrap installs beside the lab tools, is
demanded by the lab's variable, so a CI run without it fails instead of skipping the
Prometheus tests."""

from __future__ import annotations

from tests.needs import NEEDS, PROMETHEUS_TOOLS


def test_prometheus_is_demanded_with_the_lab_and_missing_without_its_binaries(monkeypatch, tmp_path):
    need = NEEDS["prometheus"]
    assert need.variable == NEEDS["lab"].variable == "CONSOLE_REQUIRE_LAB"
    monkeypatch.setenv("CONSOLE_REQUIRE_LAB", "1")
    assert need.demanded
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH: as on a machine without the package
    assert not need.present()
    for tool in PROMETHEUS_TOOLS:
        (tmp_path / tool).write_text("#!/bin/sh\n")
        (tmp_path / tool).chmod(0o755)
    assert need.present()
