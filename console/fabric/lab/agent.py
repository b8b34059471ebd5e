"""The agent of a lab's SM host: the lab is an SM host like any other.

:func:`start_lab_agent` gives the lab fabric's agent (named ``lab``) a fresh token (audited),
starts ``manage.py agent --lab`` with nothing but the console's URL and that token in its
environment (no database, no broker), records its pid in the lab's state and marks the fabric
``config["agent"]``: its pushes, verifications, audits, discoveries and counters then go through
the agent. The lab's stop stops the agent first (:meth:`Lab.stop`); :func:`forget_lab_agent`
clears the mark. ``manage.py up`` and ``manage.py lab up --agent URL`` use it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from console.fabric.agents.services import lab_agent
from console.fabric.lab.fabrics import lab_status
from console.fabric.lab.manager import Lab
from console.fabric.lab.spec import LabError
from console.fabric.models import Fabric
from console.tenancy.context import Actor


def start_lab_agent(fabric: Fabric, console: str, *, actor: Actor) -> subprocess.Popen[bytes]:
    """Start the agent of ``fabric``'s running lab, connecting out to ``console`` (its log:
    ``<workdir>/agent.log``). LabError when the lab is not up."""
    status = lab_status(fabric)
    if status["state"] != "up":
        raise LabError(f"the lab of {fabric.name} is {status['state']}: start it first")
    workdir = Path(status["workdir"])
    made = lab_agent(actor, fabric)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["IBCONSOLE_AGENT_TOKEN"] = made.token
    env["CONSOLE_DATA_DIR"] = str(workdir / "agent")
    argv = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "agent", "--console", console]
    with open(workdir / "agent.log", "ab") as log:
        proc = subprocess.Popen(
            [*argv, "--fabric", fabric.name, "--lab", str(workdir)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    Lab.attach(workdir).record_agent(proc.pid)
    fabric.config = {**(fabric.config or {}), "agent": True}
    fabric.save(update_fields=["config"])
    return proc


def forget_lab_agent(fabric: Fabric) -> None:
    """The fabric goes back to the lab driver in this process (its agent stopped)."""
    fabric.refresh_from_db()
    if (fabric.config or {}).get("agent"):
        fabric.config = {k: v for k, v in fabric.config.items() if k != "agent"}
        fabric.save(update_fields=["config"])
