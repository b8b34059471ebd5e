"""A console for a benchmark's lab: uvicorn on a free port (this process's database and Redis)
and the lab's agent connected to it, as ``manage.py up`` runs them; stopped on exit. Import
after Django is set up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchutil import free_port

from console.fabric.lab.agent import start_lab_agent
from console.fabric.models import Fabric, FabricAgent
from console.management.commands.up import web_command
from console.tenancy.context import Actor

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def console_with_agent(fabric: Fabric, base: Path, actor: Actor) -> Iterator[str]:
    """The console's URL, once the lab's agent reported its OpenSM master."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(base / "web.log", "wb") as log:
        web = subprocess.Popen(
            [*web_command(sys.executable, "127.0.0.1", port), "--log-level", "warning"],  # as `up` runs it
            cwd=ROOT,
            env=dict(os.environ, CONSOLE_DATA_DIR=str(base / "web")),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    agent = None
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/healthz", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the console did not come up: " + (base / "web.log").read_text()[-2000:]) from None
                time.sleep(0.2)
        agent = start_lab_agent(fabric, url, actor=actor)
        ready = FabricAgent.objects.filter(fabric=fabric, name="lab", connected=True, sm_state="MASTER")
        while not ready.exists():
            if time.monotonic() > deadline + 30:
                raise SystemExit("the lab's agent did not connect")
            time.sleep(0.2)
        yield url
    finally:
        for proc in (agent, web):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)
