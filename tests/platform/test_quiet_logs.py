"""Quiet by default, problems always printed: a real Celery beat sends its ticks without a log line
each (about 80 a minute drowned the console), and says them again under LOG_LEVEL=DEBUG."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
QUEUE = settings.CELERY_TASK_DEFAULT_QUEUE

pytestmark = [
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs the Redis broker to count the beat's messages"),
    pytest.mark.timeout(120),
]


def beat_output(tmp_path: Path, level: str, ticks: int = 3) -> str:
    """Run ``celery beat`` until it has put ``ticks`` messages on the broker; its output."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(QUEUE)
    env = dict(os.environ, LOG_LEVEL=level)
    log = tmp_path / f"beat-{level}.log"
    with open(log, "wb") as out:
        beat = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "console", "beat", "-l", "INFO", "-s", str(tmp_path / level)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while client.llen(QUEUE) < ticks:
                assert beat.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        finally:
            beat.terminate()
            beat.wait(20)
            client.delete(QUEUE)
    return log.read_text()


def test_the_beat_ticks_without_a_line_each_unless_debug_is_asked_for(tmp_path):
    assert "Sending due task" not in beat_output(tmp_path, "INFO")
    assert "Sending due task" in beat_output(tmp_path, "DEBUG")
