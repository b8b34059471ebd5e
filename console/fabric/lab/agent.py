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

from console.fabric.agents.services import lab_agent
from console.fabric.lab.fabrics import lab_status
from console.fabric.lab.manager import Lab
from console.fabric.lab.sms import PRIMARY
from console.fabric.lab.spec import LabError
from console.fabric.models import Fabric
from console.tenancy.context import Actor


def agent_name(sm: str) -> str:
    """The name of the agent of a lab's SM host: ``lab`` (the primary's), ``lab-standby``."""
    return "lab" if sm == PRIMARY else f"lab-{sm}"


def start_lab_agents(fabric: Fabric, console: str, *, actor: Actor) -> list[subprocess.Popen[bytes]]:
    """Start the agent of each SM host of ``fabric``'s running lab (the standby's too)."""
    lab = Lab.attach(Path(lab_status(fabric)["workdir"]))
    return [start_lab_agent(fabric, console, actor=actor, sm=sm) for sm in lab.sms]


def start_lab_agent(fabric: Fabric, console: str, *, actor: Actor, sm: str = PRIMARY) -> subprocess.Popen[bytes]:
    """Start the agent of ``fabric``'s running lab (of its SM host ``sm``), connecting out to
    ``console`` (its log: ``<workdir>/agent.log``, the standby's ``<workdir>/standby/agent.log``).
    LabError when the lab is not up."""
    status = lab_status(fabric)
    if status["state"] != "up":
        raise LabError(f"the lab of {fabric.name} is {status['state']}: start it first")
    workdir = Path(status["workdir"])
    lab = Lab.attach(workdir)
    lab.stop_agent(sm)  # one agent per SM host
    made = lab_agent(actor, fabric, name=agent_name(sm))
    # no database, no broker: nothing of either in its environment
    env = {k: v for k, v in os.environ.items() if not k.endswith(("DATABASE_URL", "REDIS_URL"))}
    env["IBCONSOLE_AGENT_TOKEN"] = made.token
    env["CONSOLE_DATA_DIR"] = str(lab.sm_dir(sm) / "agent")
    # the installed package's command (console.cli) runs it from a checkout or a wheel alike
    argv = [sys.executable, "-m", "console.cli", "manage", "agent", "--console", console]
    with open(lab.sm_dir(sm) / "agent.log", "ab") as log:
        proc = subprocess.Popen(
            [*argv, "--fabric", fabric.name, "--lab", str(workdir), "--lab-sm", sm],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    Lab.attach(workdir).record_agent(proc.pid, sm)
    return proc
