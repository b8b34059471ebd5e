"""The lab process manager: ibsim + a real OpenSM under umad2sim, controllable across processes.

Layout of a lab's workdir::

    lab.json          state (pids, socket, paths): lets `lab status` / `lab down` find the lab
    lids.json         port GUID → [LID, port] of every HCA port, from the ibnetdiscover at subnet up
    fabric.net        the topology ibsim simulates
    console.fifo      ibsim's console input (see :meth:`Lab.console`)
    ibsim.log         ibsim's console output (our commands' replies are read from here)
    opensm/           OpenSM's input files, swapped atomically, with .last-known-good/
    opensm.log        OpenSM's log (force_log_flush TRUE, so it is current)
    osm-tmp/          OSM_TMP_DIR / OSM_CACHE_DIR / dump files

What lab.json and lids.json hold is in :mod:`console.fabric.lab.state`; the ibsim console in
:mod:`console.fabric.lab.ibsim_console`.

Findings that shaped this module (ibsim 0.10, OpenSM 3.3.23):
- ibsim's console resolves only node *ids*; ``SIM_HOST`` on the other hand accepts either a node
  id or a description. :meth:`Lab.node_id` maps descriptions to ids from the net file.
- OpenSM blocked in a umad read does not always exit on SIGTERM; stop escalates to SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from console.fabric.diags import mad
from console.fabric.diags.runner import DiagEnv, DiagError, DiagRunner
from console.fabric.diags.topology import Topology, parse_topology
from console.fabric.lab.ibsim_console import IBSIM_READY, read_log, reap_dead_clients, refused, send_command
from console.fabric.lab.sms import PRIMARY, SubnetManagers
from console.fabric.lab.spec import LabError, LabLimits, LabSpec, find_umad2sim
from console.fabric.lab.state import (
    STATE_FILE,
    LabState,
    alive,
    proc_start_time,
    read_lids,
    read_state,
    write_lids,
    write_state,
)
from console.fabric.opensm.files import ArtefactStore


class Lab(SubnetManagers):
    """A running (or stopped) lab fabric. Create with :meth:`start`, find with :meth:`attach`;
    its OpenSM processes (and a standby's) are :class:`~console.fabric.lab.sms.SubnetManagers`'."""

    def __init__(self, workdir: Path, state: LabState) -> None:
        self.workdir = Path(workdir)
        self._state = state
        self._children: list[subprocess.Popen[bytes]] = []
        self._topology: Topology | None = None

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def start(cls, spec: LabSpec, *, wait: bool = True) -> Lab:
        """Write the artefacts, start ibsim and OpenSM, and (by default) wait for the subnet."""
        for tool in ("ibsim", "opensm", "sminfo", "saquery"):
            if shutil.which(tool) is None:
                raise LabError(f"{tool} not installed (need opensm, ibsim-utils, infiniband-diags)")
        workdir = spec.workdir
        workdir.mkdir(parents=True, exist_ok=True)
        existing = workdir / STATE_FILE
        if existing.exists():
            other = cls.attach(workdir)
            if other.is_running():
                raise LabError(f"a lab is already running in {workdir}")
        state = LabState(
            workdir=str(workdir),
            ibsim_sockname=spec.sockname,
            umad2sim=find_umad2sim(),
            sm_host=spec.sm_host,
            diag_host=spec.diag_host or spec.sm_host,
            routing_engine=spec.routing_engine,
            started_at=time.time(),
            limits=asdict(spec.limits),
        )
        lab = cls(workdir, state)
        (workdir / "fabric.net").write_text(spec.net_text)
        (workdir / "osm-tmp").mkdir(exist_ok=True)
        store = lab.artefacts
        store.swap(spec.artefacts())  # lint-checked: a bad start-up file never reaches OpenSM
        try:
            lab._start_ibsim(spec.limits)
            lab._start_opensm(spec)
            lab._save()
            if wait:
                lab.wait_until_up()
                store.mark_good()
                if spec.standby_host:
                    lab.start_standby(spec)
        except BaseException:
            lab.stop()
            raise
        return lab

    @classmethod
    def attach(cls, workdir: Path | str) -> Lab:
        """Find the lab recorded in ``workdir/lab.json`` (from any process)."""
        try:
            state = read_state(Path(workdir).resolve())
        except FileNotFoundError:
            raise LabError(f"no lab in {workdir}") from None
        return cls(Path(state.workdir), state)

    def _save(self) -> None:
        write_state(self.workdir, self._state)

    # -- properties --------------------------------------------------------------------------

    @property
    def limits(self) -> LabLimits:
        """Deadlines this lab was started with."""
        return LabLimits(**(self._state.limits or {}))

    @property
    def artefacts(self) -> ArtefactStore:
        """OpenSM's input directory with its last-known-good copies."""
        return ArtefactStore(self.workdir / "opensm")

    @property
    def opensm_log(self) -> Path:
        """OpenSM's log file."""
        return self.workdir / "opensm.log"

    @property
    def opensm_pid(self) -> int | None:
        """Process id of OpenSM (None when not started)."""
        return self._state.opensm_pid

    @property
    def routing_engine(self) -> str:
        """The routing engine OpenSM was asked to use."""
        return self._state.routing_engine

    @property
    def topology(self) -> Topology:
        """The designed topology (parsed net file)."""
        if self._topology is None:
            self._topology = parse_topology((self.workdir / "fabric.net").read_text())
        return self._topology

    def diag_env(self, host: str | None = None) -> DiagEnv:
        """Environment that points infiniband-diags at this lab."""
        return DiagEnv(
            umad2sim=self._state.umad2sim,
            sim_host=host or self._state.diag_host,
            ibsim_sockname=self._state.ibsim_sockname,
        )

    def diags(self, *, timeout: float | None = None, host: str | None = None) -> DiagRunner:
        """A diag runner for this lab (every call bounded by ``timeout``)."""
        return DiagRunner(self.diag_env(host), timeout=timeout or self.limits.diag_timeout)

    # -- processes ---------------------------------------------------------------------------

    def _lab_env(self, sim_host: str | None) -> dict[str, str]:
        env = dict(os.environ)
        env["IBSIM_SOCKNAME"] = self._state.ibsim_sockname
        if sim_host:
            env["LD_PRELOAD"] = self._state.umad2sim
            env["SIM_HOST"] = sim_host
        return env

    def _socket_in_use(self) -> bool:
        # ibsim binds abstract unix sockets "@<name>:ctl"; a second ibsim on the same name
        # prints "ready" and then panics, so check before starting rather than after.
        needle = f"@{self._state.ibsim_sockname}:ctl"
        try:
            with open("/proc/net/unix") as fh:
                return any(line.split()[-1].rstrip("@") == needle for line in fh if line.strip())
        except (OSError, IndexError):
            return False

    def _start_ibsim(self, limits: LabLimits) -> None:
        if self._socket_in_use():
            raise LabError(f"IBSIM_SOCKNAME {self._state.ibsim_sockname!r} is already in use")
        fifo = self.workdir / "console.fifo"
        if fifo.exists() and not stat.S_ISFIFO(fifo.stat().st_mode):
            fifo.unlink()
        if not fifo.exists():
            os.mkfifo(fifo, 0o600)
        # O_RDWR on a FIFO never blocks on Linux, and because ibsim itself then holds a write
        # end, it never reads EOF when a `lab cable unplug` CLI closes its end after a command.
        fifo_fd = os.open(fifo, os.O_RDWR)
        log = open(self.workdir / "ibsim.log", "ab")
        argv = ["ibsim", "-s"]
        argv += ["-N", str(limits.max_nodes), "-S", str(limits.max_switches)]
        argv += ["-P", str(limits.max_ports), str(self.workdir / "fabric.net")]
        try:
            proc = subprocess.Popen(
                argv,
                stdin=fifo_fd,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=self._lab_env(None),
                start_new_session=True,
            )
        finally:
            os.close(fifo_fd)
            log.close()
        self._children.append(proc)
        self._state.ibsim_pid = proc.pid
        self._state.ibsim_start = proc_start_time(proc.pid)
        deadline = time.monotonic() + limits.up_timeout
        while IBSIM_READY not in self._read_ibsim_log() or not self._socket_in_use():
            if proc.poll() is not None or "ibpanic" in self._read_ibsim_log():
                raise LabError(f"ibsim exited ({proc.returncode}): {self._read_ibsim_log()[-500:]}")
            if time.monotonic() > deadline:
                raise LabError("ibsim did not become ready")
            time.sleep(0.05)

    def ibsim_running(self) -> bool:
        """True when this lab's ibsim is alive, as lab.json says now (re-read: another process
        may have restarted OpenSM or stopped the lab since this handle was made)."""
        self._refresh()
        return alive(self._state.ibsim_pid, self._state.ibsim_start)

    def is_running(self) -> bool:
        """True when ibsim and an OpenSM (the primary, or the standby that took over) are alive."""
        s = self._state
        return alive(s.ibsim_pid, s.ibsim_start) and any(self.sm_alive(sm) for sm in self.sms)

    def _kill(self, pid: int | None, start: int | None) -> None:
        if not alive(pid, start):
            return
        assert pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.limits.stop_timeout
        while alive(pid, start) and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        if alive(pid, start):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            while alive(pid, start) and time.monotonic() < deadline + 5:
                self._reap()
                time.sleep(0.05)
        self._reap()

    def _reap(self) -> None:
        for child in self._children:
            child.poll()

    def _refresh(self) -> None:
        """Re-read lab.json: another process (a worker's push) may have restarted OpenSM, and a
        stale pid would leave the new OpenSM running after stop() or miss it on reload()."""
        try:
            fresh = read_state(self.workdir)
        except (FileNotFoundError, ValueError, TypeError):
            return
        # Only the same incarnation: a lab whose start failed before its first save must not
        # adopt the pids of an older, stopped lab that used this workdir.
        if fresh.started_at == self._state.started_at:
            self._state = fresh

    def stop(self) -> None:
        """Stop its agent, OpenSM, then ibsim (whole process groups). Safe to call repeatedly."""
        self._refresh()
        s = self._state
        # the agents first: they would report their OpenSM gone
        self._kill(s.agent_pid, s.agent_start)
        self._kill(s.standby_agent_pid, s.standby_agent_start)
        # OpenSM first: with ibsim gone it can block in a umad read and ignore SIGTERM.
        self._kill(s.standby_pid, s.standby_start)
        self._kill(s.opensm_pid, s.opensm_start)
        self._kill(s.ibsim_pid, s.ibsim_start)
        s.state = "stopped"
        mad.close_shared(lambda env: env.ibsim_sockname == s.ibsim_sockname)
        if self.workdir.exists():
            self._save()

    def port_lids(self) -> dict[int, tuple[int, int]]:
        """Port GUID → (LID, port) of every HCA port as discovered when the subnet came up.

        A hint, not the truth: LIDs are OpenSM's to change. Users check the port behind a LID
        (NodeInfo) and rediscover on a miss.
        """
        return read_lids(self.workdir)

    # -- readiness ---------------------------------------------------------------------------

    def wait_until_up(self, timeout: float | None = None) -> float:
        """Poll the SM (never its log) until the subnet is configured; returns seconds waited.

        Up means: ``sminfo`` answers MASTER, ibnetdiscover finds every node of the net file, the
        SM's own port is Active (ports go Active only at the end of OpenSM's sweep).
        """
        limits = self.limits
        deadline = time.monotonic() + (timeout or limits.up_timeout)
        started = time.monotonic()
        diags = self.diags(timeout=min(5.0, limits.diag_timeout))
        expected = len(self.topology.nodes)
        last = "no answer yet"
        while True:
            if not self.is_running():
                self._state.state = "failed"
                self._save()
                raise LabError(f"lab process exited while waiting: {self._tail('opensm.out')}")
            try:
                sm = diags.sminfo()
                if sm.is_master:
                    # ibnetdiscover (SMPs), not `saquery NR`: ibsim does not do RMPP, so SA
                    # table queries return only their first record in the lab.
                    found = self.diags(timeout=limits.diag_timeout).ibnetdiscover()
                    if len(found.nodes) >= expected and diags.portinfo(sm.lid, 1).is_active:
                        write_lids(self.workdir, found)
                        break
                    last = f"discovered {len(found.nodes)}/{expected} nodes"
                else:
                    last = f"SM state {sm.state}"
            except DiagError as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise LabError(f"subnet not up after {timeout or limits.up_timeout}s: {last}")
            time.sleep(limits.poll_interval)
        waited = time.monotonic() - started
        self._state.state = "up"
        self._state.up_seconds = round(time.time() - self._state.started_at, 3)
        self._save()
        return waited

    def status(self, *, probe: bool = False) -> dict[str, Any]:
        """Operator-facing status: everything needed to point infiniband-diags at the lab."""
        s = self._state
        ibsim_ok = alive(s.ibsim_pid, s.ibsim_start)
        opensm_ok = any(self.sm_alive(sm) for sm in self.sms)
        if ibsim_ok and opensm_ok:
            state = s.state if s.state in ("up", "starting") else "up"
        elif ibsim_ok or opensm_ok:
            state = "degraded"
        else:
            state = "stopped" if s.state == "stopped" else "down"
        out: dict[str, Any] = {
            "state": state,
            "workdir": s.workdir,
            "ibsim_sockname": s.ibsim_sockname,
            "umad2sim": s.umad2sim,
            "sm_host": s.sm_host,
            "diag_host": s.diag_host,
            "opensm_pid": s.opensm_pid if self.sm_alive(PRIMARY) else None,
            "ibsim_pid": s.ibsim_pid if ibsim_ok else None,
            "routing_engine": s.routing_engine,
            "agent_pid": s.agent_pid if alive(s.agent_pid, s.agent_start) else None,
            "opensm_log": str(self.opensm_log),
            "up_seconds": s.up_seconds,
            "sms": self.sms_status(probe=probe and ibsim_ok),
            "env": {
                "LD_PRELOAD": s.umad2sim,
                "IBSIM_SOCKNAME": s.ibsim_sockname,
                "SIM_HOST": s.diag_host,
            },
        }
        if probe and state == "up":
            try:
                out["sm_state"] = self.diags(timeout=3).sminfo().state
            except DiagError as exc:
                out["sm_state"] = f"error: {exc}"
        return out

    def _tail(self, name: str, chars: int = 800) -> str:
        try:
            return (self.workdir / name).read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    # -- ibsim console -----------------------------------------------------------------------

    def _read_ibsim_log(self, offset: int = 0) -> str:
        return read_log(self.workdir, offset)

    def console(self, command: str, *, timeout: float = 5.0) -> str:
        """Send one command to ibsim's console and return its reply (text before the prompt)."""
        if not alive(self._state.ibsim_pid, self._state.ibsim_start):
            raise LabError("ibsim is not running")
        return send_command(self.workdir, command, timeout=timeout)

    def reap_dead_clients(self) -> list[int]:
        """Free the ibsim client slots of processes killed without a goodbye (their pids):
        :func:`.ibsim_console.reap_dead_clients`."""
        if not alive(self._state.ibsim_pid, self._state.ibsim_start):
            raise LabError("ibsim is not running")
        return reap_dead_clients(self.workdir)

    def node_id(self, name: str) -> str:
        """ibsim node id for a node description (``leaf1``) or id (``S-0002c9...``)."""
        try:
            return self.topology.by_name(name).node_id
        except KeyError:
            raise LabError(f"no node {name!r} in this lab's fabric") from None

    def _port_command(self, verb: str, node: str, port: int, suffix: str = "") -> str:
        if not isinstance(port, int) or port < 0:
            raise ValueError(f"bad port {port!r}")
        reply = self.console(f'{verb} "{self.node_id(node)}"[{port}]{suffix}')
        if refused(reply):
            raise LabError(f"ibsim refused {verb} {node}[{port}]: {reply}")
        return reply

    def unplug(self, node: str, port: int) -> str:
        """Pull the cable at ``node[port]`` (ibsim ``Unlink``)."""
        return self._port_command("Unlink", node, port)

    def replug(self, node: str, port: int) -> str:
        """Put back a cable pulled with :meth:`unplug` (ibsim ``ReLink``)."""
        return self._port_command("ReLink", node, port)

    def set_counter(self, node: str, port: int, **counters: int) -> list[str]:
        """Set PortCounters fields, e.g. ``set_counter("leaf1", 1, SymbolErrorCounter=50)``."""
        replies = []
        for name, value in sorted(counters.items()):
            if not name.isidentifier() or not isinstance(value, int) or value < 0:
                raise ValueError(f"bad counter {name}={value!r}")
            replies.append(self._port_command("PerformanceSet", node, port, f" PortCounters.{name}={value}"))
        return replies
