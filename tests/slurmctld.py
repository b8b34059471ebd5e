"""A real Slurm controller for tests: Debian's slurmctld on loopback, in a temporary directory.

The generated slurm.conf declares the design's hosts as ``State=FUTURE`` nodes (so no slurmd runs),
authenticates with ``auth/none`` (Slurm 22.05 still ships it; no munged needed on a single host),
runs as the current user and takes two ephemeral ports. ``scontrol`` reaches it through
``SLURM_CONF``. Tests load exported files into it and read back what Slurm made of them.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from designer.hostlist import compress

SBIN = "/usr/sbin"


def _tool(name: str) -> str:
    found = shutil.which(name, path=f"{os.environ.get('PATH', '')}:{SBIN}")
    if found is None:
        raise FileNotFoundError(name)
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(directory: Path, hosts: list[str], *, topology_plugin: str, node_state: str = "FUTURE") -> str:
    """slurm.conf for a controller whose nodes are ``hosts`` and whose state lives in ``directory``."""
    return "\n".join(
        [
            "ClusterName=ibconsole-test",
            "SlurmctldHost=localhost",
            f"SlurmUser={getpass.getuser()}",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "AuthType=auth/none",
            "CredType=cred/none",
            f"StateSaveLocation={directory / 'state'}",
            f"SlurmdSpoolDir={directory / 'spool'}",
            f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
            f"SlurmctldLogFile={directory / 'slurmctld.log'}",
            "SlurmctldDebug=info",
            f"TopologyPlugin={topology_plugin}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            f"NodeName={compress(hosts)} NodeAddr=127.0.0.1 CPUs=1 State={node_state}",
            "PartitionName=all Nodes=ALL Default=YES",
            "",
        ]
    )


@dataclass
class Slurmctld:
    """One running slurmctld and the environment its clients need."""

    directory: Path
    proc: subprocess.Popen | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.directory / "slurm.conf"

    def configure(
        self, hosts: list[str], topology: str, *, plugin: str = "topology/tree", node_state: str = "FUTURE"
    ) -> None:
        """Write slurm.conf and topology.conf (enough for ``scontrol show hostnames``)."""
        for sub in ("state", "spool"):
            shutil.rmtree(self.directory / sub, ignore_errors=True)
            (self.directory / sub).mkdir(parents=True)
        self.conf.write_text(slurm_conf(self.directory, hosts, topology_plugin=plugin, node_state=node_state))
        (self.directory / "topology.conf").write_text(topology)
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(
        self,
        hosts: list[str],
        topology: str,
        *,
        plugin: str = "topology/tree",
        timeout: float = 30,
        node_state: str = "FUTURE",
    ) -> None:
        """(Re)start the controller with these hosts and this topology.conf; return once it answers.
        ``node_state``: the nodes' configured state (FUTURE: no slurmd needed, but not drainable;
        UNKNOWN: drainable, not responding)."""
        self.stop()
        self.configure(hosts, topology, plugin=plugin, node_state=node_state)
        log = open(self.directory / "slurmctld.out", "wb")
        self.proc = subprocess.Popen(
            [_tool("slurmctld"), "-D", "-i", "-f", str(self.conf)],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"slurmctld exited {self.proc.returncode}:\n{self.output()}")
            ping = subprocess.run([_tool("scontrol"), "ping"], env=self.env, capture_output=True, text=True)
            if "is UP" in ping.stdout:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"slurmctld did not answer in {timeout:.0f}s:\n{self.output()}")
            time.sleep(0.2)

    def scontrol(self, *args: str) -> str:
        """Run scontrol against this controller; its stdout, or an error with stderr."""
        done = subprocess.run([_tool("scontrol"), *args], env=self.env, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"scontrol {' '.join(args)} failed ({done.returncode}): {done.stderr}{done.stdout}")
        return done.stdout

    def hostnames(self, hostlist: str) -> set[str]:
        """Expand a hostlist expression the way Slurm does (needs only the configuration)."""
        if not self.env:
            self.configure(["localnode"], "")
        return set(self.scontrol("show", "hostnames", hostlist).split())

    def output(self) -> str:
        """What slurmctld printed (its errors about the configuration land here)."""
        path = self.directory / "slurmctld.out"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Stop the controller this object started (its own process group only)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.proc = None
