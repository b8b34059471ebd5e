"""A rogue subnet manager: a real OpenSM started on a host's port of a lab, as a tenant with root
on that host could run one (highest priority, OpenSM's default keys, every port a full member of
the Default partition)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from console.fabric.lab.manager import Lab


@contextlib.contextmanager
def rogue_sm(lab: Lab, host: str, workdir: Path) -> Iterator[Path]:
    """Run OpenSM (priority 15) on ``host``'s port while the block runs; yields its log file."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "partitions.conf").write_text("Default=0x7fff, ipoib : ALL=full ;\n")
    log = workdir / "opensm.log"
    env = dict(lab.diag_env(host).environ())
    env.update(OSM_TMP_DIR=str(workdir), OSM_CACHE_DIR=str(workdir))
    argv = ["opensm", "-p", "15", "-f", str(log), "-P", str(workdir / "partitions.conf"), "-F", "/dev/null"]
    proc = subprocess.Popen(
        argv, env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        yield log
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        lab.reap_dead_clients()


def wait_for(predicate, seconds: float, what: str) -> None:
    """Poll ``predicate`` every 0.2 s until it holds; AssertionError naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {seconds:.0f}s")
        time.sleep(0.2)


def logged(log: Path, text: str) -> bool:
    """True once ``text`` is in ``log``."""
    return log.exists() and text in log.read_text(errors="replace")
