"""Run infiniband-diags tools against a lab (umad2sim) or a real host, always with a timeout.

Diags can hang after topology changes (a MAD to a port that just went away waits for
retries), so every call runs in its own process group with a deadline; on expiry the whole
group is killed and :class:`DiagTimeout` raised. Nothing here retries: callers that poll
(waiting for the subnet, verifying a push) decide how often and for how long.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from console.fabric.diags.parsers import (
    NodeRecord,
    PathQuery,
    PkeyTable,
    PortCounters,
    PortInfo,
    SmInfo,
    parse_node_records,
    parse_path_records,
    parse_perfquery,
    parse_pkeys,
    parse_portinfo,
    parse_sminfo,
)
from console.fabric.diags.topology import Topology, parse_topology

DEFAULT_TIMEOUT = 10.0
TOOLS = frozenset(
    {
        "ibnetdiscover",
        "smpquery",
        "saquery",
        "sminfo",
        "perfquery",
        "ibportstate",
        "ibroute",
        "dump_fts",
    }
)


class DiagError(RuntimeError):
    """A diag tool failed (non-zero exit or unusable output)."""

    def __init__(self, argv: list[str], returncode: int | None, stderr: str, message: str = ""):
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr
        detail = message or stderr.strip().splitlines()[-1:] or ["no output"]
        super().__init__(f"{' '.join(argv)}: exit {returncode}: {''.join(detail)}")


class DiagTimeout(DiagError):
    """A diag tool did not finish within its deadline and was killed."""

    def __init__(self, argv: list[str], timeout: float, stderr: str = ""):
        self.timeout = timeout
        super().__init__(argv, None, stderr, f"timed out after {timeout:.1f}s (killed)")


@dataclass(frozen=True)
class DiagEnv:
    """Where diags talk to: a lab (umad2sim + ibsim socket + simulated host) or a real HCA."""

    umad2sim: str | None = None
    sim_host: str | None = None
    ibsim_sockname: str | None = None
    ca: str | None = None
    ca_port: int | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def environ(self) -> dict[str, str]:
        """The process environment for a diag call."""
        env = dict(os.environ)
        for key in ("LD_PRELOAD", "SIM_HOST", "IBSIM_SOCKNAME"):
            env.pop(key, None)
        if self.umad2sim:
            env["LD_PRELOAD"] = self.umad2sim
        if self.sim_host:
            env["SIM_HOST"] = self.sim_host
        if self.ibsim_sockname:
            env["IBSIM_SOCKNAME"] = self.ibsim_sockname
        env.update(self.extra)
        return env

    def ca_args(self) -> list[str]:
        """``-C ca -P port`` for real hosts with several HCAs."""
        args = []
        if self.ca:
            args += ["-C", self.ca]
        if self.ca_port is not None:
            args += ["-P", str(self.ca_port)]
        return args


@dataclass(frozen=True)
class DiagResult:
    """One finished diag call."""

    argv: list[str]
    stdout: str
    stderr: str
    returncode: int
    duration_s: float


def scratch_dir() -> str:
    """Working directory for diag processes: umad2sim creates a ``sys-<pid>/`` tree in the
    current directory (its fake sysfs) and leaves it behind when the process is killed."""
    path = os.path.join(tempfile.gettempdir(), "ibconsole-diags")
    os.makedirs(path, exist_ok=True)
    return path


class DiagRunner:
    """Runs diag tools for one :class:`DiagEnv`; every method has a timeout."""

    def __init__(self, env: DiagEnv, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.env = env
        self.timeout = timeout

    def run(self, tool: str, *args: str, timeout: float | None = None, check: bool = True) -> DiagResult:
        """Run ``tool args`` and return its output; raises DiagTimeout / DiagError."""
        if tool not in TOOLS:
            raise ValueError(f"not an infiniband-diags tool we run: {tool}")
        deadline = timeout if timeout is not None else self.timeout
        argv = [tool, *self.env.ca_args(), *args]
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env.environ(),
            text=True,
            start_new_session=True,  # own process group, so a timeout kills every child too
            cwd=scratch_dir(),
        )
        try:
            stdout, stderr = proc.communicate(timeout=deadline)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, stderr = proc.communicate()
            raise DiagTimeout(argv, deadline, stderr or "") from None
        result = DiagResult(argv, stdout, stderr, proc.returncode, time.monotonic() - started)
        if check and proc.returncode != 0:
            raise DiagError(argv, proc.returncode, stderr)
        return result

    # -- typed helpers ---------------------------------------------------------------------

    def sminfo(self, *, timeout: float | None = None) -> SmInfo:
        """The master SM as seen from our port."""
        return parse_sminfo(self.run("sminfo", timeout=timeout).stdout)

    def portinfo_local(self, *, timeout: float | None = None) -> PortInfo:
        """PortInfo of our own port (``smpquery -D portinfo 0``): its LID (0 before an SM gave it one)."""
        return parse_portinfo(self.run("smpquery", "-D", "portinfo", "0", timeout=timeout).stdout)

    def own_sminfo(self, *, timeout: float | None = None) -> SmInfo:
        """The SMInfo of the SM on our own port (``sminfo -D 0``, the empty directed route): a
        standby answers STANDBY; no SM on this port, no answer (DiagError)."""
        return parse_sminfo(self.run("sminfo", "-D", "0", timeout=timeout).stdout)

    def pkeys(self, lid: int, port: int | None = None, *, timeout: float | None = None) -> PkeyTable:
        """P_Key table of ``lid`` (CA: its port; switch: give ``port``)."""
        args = [str(lid)] + ([str(port)] if port is not None else [])
        return parse_pkeys(self.run("smpquery", "pkeys", *args, timeout=timeout).stdout)

    def portinfo(self, lid: int, port: int | None = None, *, timeout: float | None = None) -> PortInfo:
        """Port state, speed and width."""
        args = [str(lid)] + ([str(port)] if port is not None else [])
        return parse_portinfo(self.run("smpquery", "portinfo", *args, timeout=timeout).stdout)

    def perfquery(self, lid: int, port: int, *, extended: bool = False, timeout: float | None = None) -> PortCounters:
        """Port counters (``-x`` for the 64-bit data counters)."""
        args = (["-x"] if extended else []) + [str(lid), str(port)]
        return parse_perfquery(self.run("perfquery", *args, timeout=timeout).stdout)

    def path(self, src_lid: int, dst_lid: int, *, pkey: int | None = None, timeout: float | None = None) -> PathQuery:
        """SA PathRecord query between two LIDs, optionally within one partition.

        With ``pkey`` the SA only answers when both ends share that partition (and they are not
        both limited members), which is how a push proves isolation.
        """
        args = ["-p", "--slid", str(src_lid), "--dlid", str(dst_lid)]
        if pkey is not None:
            args += ["--pkey", f"{pkey | 0x8000:#06x}"]
        return parse_path_records(self.run("saquery", *args, timeout=timeout).stdout)

    def node_records(self, *, timeout: float | None = None) -> list[NodeRecord]:
        """Every SA NodeRecord: LIDs, port GUIDs and descriptions of the whole subnet."""
        return parse_node_records(self.run("saquery", "NR", timeout=timeout).stdout)

    def ibnetdiscover(self, *, timeout: float | None = None) -> Topology:
        """Discover the fabric and parse it."""
        return parse_topology(self.run("ibnetdiscover", timeout=timeout).stdout)

    def port_state(self, lid: int, port: int, *, timeout: float | None = None) -> PortInfo:
        """``ibportstate <lid> <port> query``; its peer query may fail, the local part is kept."""
        result = self.run("ibportstate", str(lid), str(port), "query", timeout=timeout, check=False)
        if "LinkState" not in result.stdout:
            raise DiagError(result.argv, result.returncode, result.stderr)
        return parse_portinfo(result.stdout)

    def set_port_state(
        self,
        lid: int,
        port: int,
        op: str,
        value: int | None = None,
        *,
        timeout: float | None = None,
    ) -> DiagResult:
        """``ibportstate <lid> <port> enable|disable|reset`` (switch port administration), or
        ``width|speed <code>`` (LinkWidthEnabled / LinkSpeedEnabled, an integer code)."""
        if op in ("enable", "disable", "reset"):
            if value is not None:
                raise ValueError(f"ibportstate {op} takes no value")
            args = [op]
        elif op in ("width", "speed"):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 256:
                raise ValueError(f"ibportstate {op} needs an integer code 1-255, not {value!r}")
            args = [op, str(value)]
        else:
            raise ValueError(f"unsupported ibportstate operation {op!r}")
        return self.run("ibportstate", str(lid), str(port), *args, timeout=timeout, check=False)

    def ibroute(self, lid: int, *, timeout: float | None = None) -> str:
        """Raw unicast forwarding table of a switch."""
        return self.run("ibroute", str(lid), timeout=timeout).stdout
