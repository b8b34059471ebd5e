"""The lab's subnet managers: its OpenSM (``primary``) and, with ``lab up --standby-sm``, a
standby OpenSM on a second CA, each with its own files, log and agent, as two SM hosts have.

Layout: the primary's files stay where they always were (``opensm/``, ``opensm.log``,
``osm-tmp/``); the standby's are under ``standby/`` (``standby/opensm/``,
``standby/opensm.log``, ``standby/osm-tmp/``). Which of them is master is OpenSM's business
(priorities, SMInfo polling, handover): :meth:`SubnetManagers.sm_role` asks each SM's own port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from console.fabric.diags.runner import DiagError, DiagRunner
from console.fabric.lab.routing import log_mark, swept_since
from console.fabric.lab.spec import LabError, LabLimits, LabSpec
from console.fabric.lab.state import LabState, alive, proc_start_time
from console.fabric.opensm.files import ArtefactStore

PRIMARY, STANDBY = "primary", "standby"
SMS = (PRIMARY, STANDBY)


class SubnetManagers:
    """The OpenSM processes of a :class:`~console.fabric.lab.manager.Lab` (mixed into it)."""

    workdir: Path
    _state: LabState
    _children: list[subprocess.Popen[bytes]]

    # What the Lab provides (declared for the type checker; the Lab's own win).

    @property
    def limits(self) -> LabLimits:
        raise NotImplementedError

    def _kill(self, pid: int | None, start: int | None) -> None:
        raise NotImplementedError

    def _refresh(self) -> None:
        raise NotImplementedError

    def _save(self) -> None:
        raise NotImplementedError

    def _lab_env(self, sim_host: str | None) -> dict[str, str]:
        raise NotImplementedError

    def diags(self, *, timeout: float | None = None, host: str | None = None) -> DiagRunner:
        raise NotImplementedError

    def wait_until_up(self, timeout: float | None = None) -> float:
        raise NotImplementedError

    # -- where each SM lives -----------------------------------------------------------------

    @staticmethod
    def _check(sm: str) -> str:
        if sm not in SMS:
            raise LabError(f"no subnet manager {sm!r} (the lab has {', '.join(SMS)})")
        return sm

    @property
    def sms(self) -> list[str]:
        """The lab's subnet managers: ``primary``, and ``standby`` when it has one."""
        return [PRIMARY, STANDBY] if self._state.standby_host else [PRIMARY]

    def sm_dir(self, sm: str = PRIMARY) -> Path:
        """Where an SM's files, log and scratch live."""
        return self.workdir if self._check(sm) == PRIMARY else self.workdir / STANDBY

    def store_of(self, sm: str = PRIMARY) -> ArtefactStore:
        """An SM's input directory with its last-known-good copies."""
        return ArtefactStore(self.sm_dir(sm) / "opensm")

    def log_of(self, sm: str = PRIMARY) -> Path:
        """An SM's log."""
        return self.sm_dir(sm) / "opensm.log"

    def host_of(self, sm: str = PRIMARY) -> str:
        """The ibsim node id of the CA an SM runs on."""
        return self._state.sm_host if self._check(sm) == PRIMARY else self._state.standby_host

    def _pid(self, sm: str) -> tuple[int | None, int | None]:
        s = self._state
        return (s.opensm_pid, s.opensm_start) if self._check(sm) == PRIMARY else (s.standby_pid, s.standby_start)

    def sm_alive(self, sm: str = PRIMARY) -> bool:
        """True while that OpenSM process runs."""
        return alive(*self._pid(sm))

    # -- processes ---------------------------------------------------------------------------

    def _start_opensm(self, spec: LabSpec | None = None, sm: str = PRIMARY) -> None:
        standby = self._check(sm) == STANDBY
        base = self.sm_dir(sm)
        if spec is not None:
            d = base / "opensm"
            argv = ["opensm", "-f", str(self.log_of(sm)), "-F", str(d / "opensm.conf")]
            argv += ["-R", spec.routing_engine, "-P", str(d / "partitions.conf")]
            if spec.root_guids:
                argv += ["-a", str(d / "root_guids.conf")]
            if spec.cn_guids:
                argv += ["-u", str(d / "cn_guids.conf")]
            if spec.qos_policy:
                argv += ["-Q", "-Y", str(d / "qos-policy.conf")]
            if standby:
                self._state.standby_argv = argv
            else:
                self._state.opensm_argv = argv
        argv = (self._state.standby_argv if standby else self._state.opensm_argv) or []
        env = self._lab_env(self.host_of(sm))
        tmp = base / "osm-tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env["OSM_TMP_DIR"] = env["OSM_CACHE_DIR"] = str(tmp)
        with open(base / "opensm.out", "ab") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=base,
                env=env,
                start_new_session=True,
            )
        self._children.append(proc)
        if standby:
            self._state.standby_pid, self._state.standby_start = proc.pid, proc_start_time(proc.pid)
        else:
            self._state.opensm_pid, self._state.opensm_start = proc.pid, proc_start_time(proc.pid)

    def start_standby(self, spec: LabSpec) -> None:
        """Write the standby's files and start it on ``spec.standby_host``; returns once its own
        port answers SMInfo (STANDBY, or MASTER if it outranks the master)."""
        assert spec.standby_host
        self._state.standby_host = spec.standby_host
        store = self.store_of(STANDBY)
        store.swap(spec.artefacts(standby=True))
        self._start_opensm(spec, STANDBY)
        self._save()
        self.wait_for_sm(STANDBY)
        store.mark_good()

    def wait_for_sm(self, sm: str, timeout: float | None = None) -> str:
        """Poll an SM's own port until it answers SMInfo; its state (LabError on timeout)."""
        deadline = time.monotonic() + (timeout or self.limits.up_timeout)
        last = "no answer yet"
        while time.monotonic() < deadline:
            if not self.sm_alive(sm):
                raise LabError(f"the {sm} OpenSM exited: {self._sm_tail(sm)}")
            role = self.sm_role(sm)
            if role.get("state") in ("MASTER", "STANDBY"):
                return str(role["state"])
            last = str(role.get("state") or role.get("error"))
            time.sleep(self.limits.poll_interval)
        raise LabError(f"the {sm} OpenSM did not answer SMInfo: {last}")

    def _sm_tail(self, sm: str) -> str:
        with contextlib.suppress(OSError):
            return (self.sm_dir(sm) / "opensm.out").read_text(errors="replace")[-500:]
        return ""

    def sm_role(self, sm: str = PRIMARY, *, timeout: float = 3.0) -> dict[str, Any]:
        """What an SM says of itself (SMInfo of its own port): state, priority, guid."""
        try:
            info = self.diags(timeout=timeout, host=self.host_of(sm)).own_sminfo()
        except DiagError as exc:
            return {"state": "NO ANSWER", "priority": None, "guid": None, "error": str(exc)[:200]}
        return {"state": info.state, "priority": info.priority, "guid": f"0x{info.guid:016x}"}

    def restart_sm(self, *, wait: bool = True, sm: str = PRIMARY) -> None:
        """Restart an OpenSM with the same arguments (needed after non-reloadable option changes).
        The state is read again first: another process (the agent's push, an operator) may have
        restarted it since, and a stale pid would leave that OpenSM running beside the new one."""
        self._refresh()
        self._kill(*self._pid(sm))
        self._start_opensm(sm=sm)
        if sm == PRIMARY:
            self._state.state = "starting"
        self._save()
        if wait and sm == PRIMARY and not self._other_master(sm):
            self.wait_until_up()
        elif wait:
            self.wait_for_sm(sm)

    def _other_master(self, sm: str) -> bool:
        return any(o != sm and self.sm_alive(o) and self.sm_role(o).get("state") == "MASTER" for o in self.sms)

    def kill_sm(self, sm: str = PRIMARY) -> None:
        """Kill an OpenSM at once (SIGKILL: a crash, no goodbye), as a failover drill does."""
        self._refresh()
        pid, start = self._pid(sm)
        if alive(pid, start):
            assert pid is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self._kill(pid, start)

    def reload(self, sm: str = PRIMARY) -> None:
        """SIGHUP an OpenSM: re-read partitions, QoS policy and reloadable options; heavy sweep."""
        self._refresh()
        pid, start = self._pid(sm)
        if not alive(pid, start):
            raise LabError(f"OpenSM ({sm}) is not running")
        assert pid is not None
        os.kill(pid, signal.SIGHUP)

    def sweep_mark(self, sm: str = PRIMARY) -> int:
        """A mark in an OpenSM's log; :meth:`swept_since` tells whether a sweep ended after it.

        Take it before :meth:`reload`: a heavy sweep that ends after the mark ran (at least its
        end did) after the SIGHUP. The lab's OpenSM flushes every line (force_log_flush TRUE).
        """
        return log_mark(self.log_of(sm))

    def swept_since(self, mark: int, sm: str = PRIMARY) -> bool:
        """True when OpenSM logged the end of a heavy sweep after ``mark`` (see
        :func:`console.fabric.lab.routing.swept_since`)."""
        return swept_since(self.log_of(sm), mark)

    # -- agents ------------------------------------------------------------------------------

    def _agent(self, sm: str) -> tuple[int | None, int | None]:
        s = self._state
        return (
            (s.agent_pid, s.agent_start) if self._check(sm) == PRIMARY else (s.standby_agent_pid, s.standby_agent_start)
        )

    def agent_alive(self, sm: str = PRIMARY) -> bool:
        """True while the agent of that SM host runs."""
        return alive(*self._agent(sm))

    def stop_agent(self, sm: str = PRIMARY) -> None:
        """Stop the agent recorded for an SM host of this lab, if it runs."""
        self._refresh()
        self._kill(*self._agent(sm))
        self.record_agent(None, sm)

    def record_agent(self, pid: int | None, sm: str = PRIMARY) -> None:
        """Note (or, with None, forget) the agent process serving an SM host of this lab."""
        self._refresh()
        start = proc_start_time(pid) if pid is not None else None
        if self._check(sm) == PRIMARY:
            self._state.agent_pid, self._state.agent_start = pid, start
        else:
            self._state.standby_agent_pid, self._state.standby_agent_start = pid, start
        self._save()

    def sms_status(self, *, probe: bool = False) -> list[dict[str, Any]]:
        """Each SM: name, CA, pid (None: not running), agent pid, and with ``probe`` its role
        and priority as its own port answers."""
        out = []
        for sm in self.sms:
            running = self.sm_alive(sm)
            row: dict[str, Any] = {
                "name": sm,
                "host": self.host_of(sm),
                "pid": self._pid(sm)[0] if running else None,
                "agent_pid": self._agent(sm)[0] if self.agent_alive(sm) else None,
                "directory": str(self.sm_dir(sm) / "opensm"),
                "log": str(self.log_of(sm)),
            }
            if probe:
                role = self.sm_role(sm) if running else {"state": "NOT RUNNING", "priority": None}
                row.update(role=role["state"], priority=role.get("priority"), guid=role.get("guid"))
            out.append(row)
        return out
