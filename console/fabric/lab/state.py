"""What a lab leaves in its workdir for other processes: ``lab.json`` and ``lids.json``.

``lab.json`` records pids (with their kernel start times, so a recycled pid is never mistaken
for ours), the socket name and paths: enough for another process to find and control the lab.
``lids.json`` is the port GUID → [LID, port] map of every HCA port, from the ibnetdiscover at
subnet up.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from console.fabric.diags.topology import Topology

STATE_FILE = "lab.json"
LIDS_FILE = "lids.json"


@dataclass
class LabState:
    """What :file:`lab.json` records; enough for another process to find and control the lab."""

    workdir: str
    ibsim_sockname: str
    umad2sim: str
    sm_host: str
    diag_host: str
    routing_engine: str
    ibsim_pid: int | None = None
    ibsim_start: int | None = None
    opensm_pid: int | None = None
    opensm_start: int | None = None
    opensm_argv: list[str] | None = None
    state: str = "starting"
    started_at: float = 0.0
    up_seconds: float | None = None
    limits: dict[str, Any] | None = None  # LabLimits as a dict (ints and floats)
    agent_pid: int | None = None  # the agent serving this lab's OpenSM (manage.py up starts one)
    agent_start: int | None = None
    # A standby OpenSM on a second CA (``lab up --standby-sm``), and its own agent.
    standby_host: str = ""
    standby_pid: int | None = None
    standby_start: int | None = None
    standby_argv: list[str] | None = None
    standby_agent_pid: int | None = None
    standby_agent_start: int | None = None


def proc_start_time(pid: int) -> int | None:
    """Kernel start time of ``pid`` (guards against killing a recycled pid), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    if fields[0] == "Z":  # a zombie is as good as gone
        return None
    return int(fields[19])


def alive(pid: int | None, start: int | None) -> bool:
    """True when ``pid`` runs and is the process started at ``start`` (not a recycled pid)."""
    return pid is not None and start is not None and proc_start_time(pid) == start


def read_state(workdir: Path) -> LabState:
    """The state recorded in ``workdir/lab.json`` (FileNotFoundError when there is none)."""
    return LabState(**json.loads((workdir / STATE_FILE).read_text()))


def write_state(workdir: Path, state: LabState) -> None:
    """Replace ``workdir/lab.json`` atomically."""
    tmp = workdir / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(asdict(state), indent=2, sort_keys=True))
    os.replace(tmp, workdir / STATE_FILE)


def read_lids(workdir: Path) -> dict[int, tuple[int, int]]:
    """Port GUID → (LID, port) from ``lids.json`` ({} when missing or unreadable)."""
    try:
        raw = json.loads((workdir / LIDS_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return {int(guid, 16): (int(lid), int(port)) for guid, (lid, port) in raw.items()}


def write_lids(workdir: Path, topology: Topology) -> None:
    """Record the LID and port of every HCA port ``topology`` found (atomically)."""
    lids = {
        f"{guid:#018x}": [topology.nodes[nid].lid, port]
        for (nid, port), guid in topology.port_guids.items()
        if not topology.nodes[nid].is_switch and topology.nodes[nid].lid
    }
    tmp = workdir / f".{LIDS_FILE}.tmp"
    tmp.write_text(json.dumps(lids, sort_keys=True))
    os.replace(tmp, workdir / LIDS_FILE)
