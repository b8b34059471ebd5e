"""The agent of a lab's SM host: the lab is an SM host like any other.

:func:`start_lab_agent` gives the lab fabric's agent (named ``lab``) a fresh token (audited),
starts ``manage.py agent --lab`` with nothing but the console's URL and that token in its
environment (no database, no broker) and records its pid in the lab's state: the fabric's pushes,
verifications, audits, discoveries and counters go through it (a lab fabric has no other way to
its SM host). The lab's stop stops the agent first (:meth:`Lab.stop`). ``manage.py up``,
``manage.py lab up`` and the lab tests use it.
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
    Lab.attach(workdir).stop_agent()  # one agent per SM host
    made = lab_agent(actor, fabric)
    # no database, no broker: nothing of either in its environment
    env = {k: v for k, v in os.environ.items() if not k.endswith(("DATABASE_URL", "REDIS_URL"))}
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
    return proc
