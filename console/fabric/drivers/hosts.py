"""The OpenSM hosts a driver pushes to: a local OpenSM (paths from ``Fabric.config``) or a
running lab, and the push engine's view of either (progress reported as steps start)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from console.fabric.diags.runner import DiagEnv, DiagRunner
from console.fabric.drivers.base import DriverError, DriverUnavailable, Progress
from console.fabric.opensm.files import ArtefactStore


class OpenSmHost(Protocol):
    """An OpenSM the driver can write files for, signal, restart and run diags against."""

    @property
    def artefacts(self) -> ArtefactStore: ...

    def reload(self) -> None: ...

    def restart(self) -> None: ...

    def diags(self, *, timeout: float | None = None) -> DiagRunner: ...

    def sm_log(self) -> tuple[Path | None, str]:
        """OpenSM's log (None: not readable here) and the routing engine it was asked for."""
        ...

    def phy_dir(self) -> Path | None:
        """Where mlxlink's readings of the ports are recorded on this host (None: nowhere)."""
        ...


class LocalOpenSmHost:
    """OpenSM on this machine, described by ``Fabric.config``::

    {"directory": "/etc/opensm", "pid_file": "/run/opensm.pid" | "pid": 1234, "phy_dir": "/var/lib/mlxlink",
     "reload_command": [...], "restart_command": ["systemctl", "restart", "opensm"],
     "ca": "mlx5_0", "ca_port": 1, "opensm_log": "/var/log/opensm.log", "routing_engine": "ftree"}
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        directory = config.get("directory")
        if not directory:
            raise DriverUnavailable("opensm driver needs config.directory (OpenSM's file directory)")
        self.config = dict(config)
        self._store = ArtefactStore(Path(directory))

    @property
    def artefacts(self) -> ArtefactStore:
        """OpenSM's input directory."""
        return self._store

    def pid(self) -> int:
        """OpenSM's pid from ``config.pid`` or ``config.pid_file``."""
        if self.config.get("pid"):
            return int(self.config["pid"])
        pid_file = self.config.get("pid_file")
        if not pid_file:
            raise DriverUnavailable("opensm driver needs config.pid_file, pid or reload_command")
        try:
            return int(Path(pid_file).read_text().split()[0])
        except (OSError, ValueError, IndexError) as exc:
            raise DriverUnavailable(f"cannot read OpenSM pid from {pid_file}: {exc}") from exc

    def _run(self, argv: list[str], what: str) -> None:
        try:
            subprocess.run(argv, check=True, timeout=60, capture_output=True)
        except (OSError, subprocess.SubprocessError) as exc:
            raise DriverError(f"{what} failed: {exc}") from exc

    def reload(self) -> None:
        """``reload_command`` if configured, else SIGHUP to OpenSM's pid."""
        if self.config.get("reload_command"):
            self._run(list(self.config["reload_command"]), "reload")
            return
        try:
            os.kill(self.pid(), signal.SIGHUP)
        except ProcessLookupError as exc:
            raise DriverUnavailable("OpenSM is not running") from exc

    def restart(self) -> None:
        """Run ``restart_command`` (a restart cannot be improvised safely)."""
        if not self.config.get("restart_command"):
            raise DriverError("OpenSM needs a restart but config.restart_command is not set")
        self._run(list(self.config["restart_command"]), "restart")

    def diags(self, *, timeout: float | None = None) -> DiagRunner:
        """infiniband-diags on the local HCA."""
        env = DiagEnv(ca=self.config.get("ca"), ca_port=self.config.get("ca_port"))
        return DiagRunner(env, timeout=timeout or 10.0)

    def sm_log(self) -> tuple[Path | None, str]:
        """``config.opensm_log`` (its routing and sweep lines need ``force_log_flush TRUE``)."""
        log = self.config.get("opensm_log")
        return (Path(log) if log else None), str(self.config.get("routing_engine") or "ftree")

    def phy_dir(self) -> Path | None:
        """``config.phy_dir``: one mlxlink output per port, written by a periodic job."""
        directory = self.config.get("phy_dir")
        return Path(directory) if directory else None


class LabHost:
    """A running lab (:class:`console.fabric.lab.manager.Lab`) as an OpenSM host: its primary
    OpenSM, or (``sm="standby"``) its standby's, each with its own files, log and CA."""

    #: diag processes one request may run at once: ibsim serves ten umad clients in all, and
    #: the lab's OpenSMs, its agents' MAD helpers, the collector's reader and the tests' own
    #: diags hold some of them (a client refused panics: "sim_init: connect failed")
    parallel_diags = 3

    def __init__(self, lab: Any, sm: str = "primary") -> None:
        self.lab = lab
        self.sm = sm

    @property
    def artefacts(self) -> ArtefactStore:
        """That OpenSM's directory."""
        return self.lab.store_of(self.sm)

    def reload(self) -> None:
        """SIGHUP that OpenSM."""
        self.lab.reload(self.sm)

    def restart(self) -> None:
        """Restart that OpenSM with its arguments and wait for it."""
        self.lab.reap_dead_clients()  # a killed OpenSM's ibsim slot
        self.lab.restart_sm(wait=True, sm=self.sm)

    def stop_sm(self) -> None:
        """Kill that OpenSM (SIGKILL, as a crash): a failover drill's fault."""
        self.lab.kill_sm(self.sm)

    def diags(self, *, timeout: float | None = None) -> DiagRunner:
        """Diags from that OpenSM's CA."""
        return self.lab.diags(timeout=timeout, host=self.lab.host_of(self.sm))

    def sm_log(self) -> tuple[Path | None, str]:
        """That OpenSM's log and the engine it was started with."""
        return self.lab.log_of(self.sm), self.lab.routing_engine

    def phy_dir(self) -> Path | None:
        """The lab's ``phy`` directory (ibsim reports no PHY: tests put recorded readings there)."""
        return Path(self.lab.workdir) / "phy"

    def sweep_mark(self) -> int:
        """Where that OpenSM's (flushed) log ends now; see :meth:`swept_since`."""
        return self.lab.sweep_mark(self.sm)

    def swept_since(self, mark: int) -> bool:
        """True once that OpenSM logged the end of a heavy sweep after ``mark``."""
        return self.lab.swept_since(mark, self.sm)

    def port_lids(self) -> dict[int, tuple[int, int]]:
        """HCA port GUID → (LID, port) as discovered when the lab came up (a hint)."""
        return self.lab.port_lids()

    def conf_needs(self) -> dict[str, str]:
        """The lab tells the end of OpenSM's sweeps from its log: it must be flushed."""
        return {"force_log_flush": "TRUE"}


class ProgressTarget:
    """The engine's PushTarget, reporting steps as they start (and running test pauses)."""

    def __init__(self, host: OpenSmHost, progress: Progress) -> None:
        self.host = host
        self.progress = progress
        self.reloads = 0

    @property
    def artefacts(self) -> ArtefactStore:
        return self.host.artefacts

    def reload(self) -> None:
        self.reloads += 1
        self.progress("reload" if self.reloads == 1 else "rollback", "running")
        self.host.reload()

    def diags(self, *, timeout: float | None = None) -> DiagRunner:
        self.progress("verify", "running")
        return self.host.diags(timeout=timeout)

    # The engine's optional hooks, passed through when the host has them.

    def sweep_mark(self) -> object | None:
        mark = getattr(self.host, "sweep_mark", None)
        return mark() if callable(mark) else None

    def swept_since(self, mark: object) -> bool:
        return bool(self.host.swept_since(mark))  # type: ignore[attr-defined]

    def port_lids(self) -> dict[int, tuple[int, int]]:
        lids = getattr(self.host, "port_lids", None)
        return lids() if callable(lids) else {}
