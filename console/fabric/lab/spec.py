"""What a lab fabric is made of (:class:`LabSpec`) and the artefacts it starts OpenSM with."""

from __future__ import annotations

import glob
import hashlib
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from console.fabric.opensm import ha
from console.fabric.opensm.conf import OpenSmConfig, render_opensm_conf
from console.fabric.opensm.files import Artefact
from console.fabric.opensm.lint import render_guid_file
from console.fabric.opensm.partitions import Partition
from console.fabric.opensm.partitions_file import render_file
from console.fabric.opensm.qos import QosOptions, QosPolicy, render_qos_policy

UMAD2SIM_GLOBS = (
    "/usr/lib/*/umad2sim/libumad2sim.so",
    "/usr/lib/umad2sim/libumad2sim.so",
    "/usr/lib64/umad2sim/libumad2sim.so",
)


class LabError(RuntimeError):
    """The lab could not be started, found or controlled."""


def find_umad2sim() -> str:
    """Path of ``libumad2sim.so`` (Debian ships it in ``libumad2sim0``, pulled by ibsim-utils)."""
    for pattern in UMAD2SIM_GLOBS:
        for path in sorted(glob.glob(pattern)):
            return path
    for package in ("libumad2sim0", "ibsim-utils"):
        try:
            listing = subprocess.run(
                ["dpkg", "-L", package], capture_output=True, text=True, timeout=10, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in listing.splitlines():
            if line.endswith("libumad2sim.so"):
                return line
    raise LabError("libumad2sim.so not found: install ibsim-utils")


@dataclass(frozen=True)
class LabLimits:
    """Simulator capacity and the deadlines the lab works to."""

    max_nodes: int = 8192
    max_switches: int = 1024
    max_ports: int = 80000
    up_timeout: float = 60.0
    diag_timeout: float = 10.0
    stop_timeout: float = 5.0
    poll_interval: float = 0.1


@dataclass(frozen=True)
class LabSpec:
    """Everything needed to bring one lab fabric up.

    ``sm_host`` names the CA OpenSM runs on (node description such as ``hca01`` or ibsim node id);
    ``standby_host``, when given, the CA of a standby OpenSM with its own directory
    (``<workdir>/standby``), the same files and a lower priority (:mod:`console.fabric.opensm.ha`).
    ``socket_name`` defaults to one derived from ``workdir`` so labs never share a socket.
    """

    net_text: str
    workdir: Path
    sm_host: str
    routing_engine: str = "ftree"
    root_guids: Sequence[int] = ()
    cn_guids: Sequence[int] = ()
    socket_name: str | None = None
    diag_host: str | None = None
    partitions: Sequence[Partition] = ()
    qos_policy: QosPolicy | None = None
    qos_options: QosOptions | None = None
    limits: LabLimits = field(default_factory=LabLimits)
    standby_host: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "workdir", Path(self.workdir).resolve())
        object.__setattr__(self, "root_guids", tuple(self.root_guids))
        object.__setattr__(self, "cn_guids", tuple(self.cn_guids))
        object.__setattr__(self, "partitions", tuple(self.partitions))

    @property
    def sockname(self) -> str:
        """The ``IBSIM_SOCKNAME`` of this lab (short: it becomes a unix socket name)."""
        if self.socket_name:
            return self.socket_name
        digest = hashlib.sha1(str(self.workdir).encode()).hexdigest()[:10]
        return f"lab-{digest}"

    @property
    def artefact_dir(self) -> Path:
        """Directory OpenSM reads its files from."""
        return self.workdir / "opensm"

    @property
    def standby_dir(self) -> Path:
        """Directory the standby OpenSM reads its files from."""
        return self.workdir / "standby" / "opensm"

    def opensm_config(self, *, standby: bool = False) -> OpenSmConfig:
        """The ``opensm.conf`` the lab's (standby) OpenSM starts with (file paths point into its
        own directory): the console's HA priority and polling settings included."""
        d = self.standby_dir if standby else self.artefact_dir
        priority = ha.STANDBY_PRIORITY if standby else ha.MASTER_PRIORITY
        return OpenSmConfig(
            routing_engine=self.routing_engine,
            partition_config_file=str(d / "partitions.conf"),
            qos_policy_file=str(d / "qos-policy.conf") if self.qos_policy else None,
            root_guid_file=str(d / "root_guids.conf") if self.root_guids else None,
            cn_guid_file=str(d / "cn_guids.conf") if self.cn_guids else None,
            qos=(self.qos_options or QosOptions()) if self.qos_policy else None,
            force_log_flush=True,
            extra={
                "dump_files_dir": str(d.parent / "osm-tmp"),
                "sm_priority": str(priority),
                "sminfo_polling_timeout": str(ha.SMINFO_POLLING_MS),
                "polling_retry_number": str(ha.POLLING_RETRIES),
            },
        )

    def artefacts(self, *, standby: bool = False) -> list[Artefact]:
        """Rendered start-up artefacts (all lint clean by construction)."""
        conf = render_opensm_conf(self.opensm_config(standby=standby))
        out = [
            Artefact("partitions", "partitions.conf", render_file(self.partitions)),
            Artefact("opensm-conf", "opensm.conf", conf),
        ]
        if self.root_guids:
            out.append(Artefact("root-guids", "root_guids.conf", render_guid_file(self.root_guids)))
        if self.cn_guids:
            out.append(Artefact("cn-guids", "cn_guids.conf", render_guid_file(self.cn_guids)))
        if self.qos_policy:
            out.append(Artefact("qos-policy", "qos-policy.conf", render_qos_policy(self.qos_policy)))
        return out
