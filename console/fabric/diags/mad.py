"""Client of the MAD helper (:mod:`console.fabric.diags.madworker`): many MADs, one process.

A :class:`MadSession` starts ``python -m console.fabric.diags.madworker`` with the environment of
a :class:`~console.fabric.diags.runner.DiagEnv` (``LD_PRELOAD`` umad2sim, ``SIM_HOST``,
``IBSIM_SOCKNAME`` in the lab; nothing on a real host), sends it one JSON request per line and
reads one reply per line. Every request has a deadline: a helper that does not answer in time
is killed (whole process group) and :class:`MadTimeout` raised; the next request starts a fresh
helper. A helper that cannot start (no libibmad, no umad port) raises :class:`MadUnavailable`,
which callers take as "use the diag processes instead".

The helper keeps many MADs in flight (``mode="pipelined"``, its default where libibumad is
usable) or sends one at a time (``mode="sync"``); the answers are the same. ``last_stats``
holds what the last request cost (MADs sent, seconds, retries, failures).

Use it as a context manager, or call :meth:`MadSession.close`::

    with MadSession(lab.diag_env()) as mad:
        tables = mad.pkeys([(lid, 1) for lid in lids])
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from console.fabric.diags.parsers import PkeyEntry, PkeyTable
from console.fabric.diags.runner import DiagEnv, scratch_dir

PROJECT_ROOT = Path(__file__).resolve().parents[3]
MODULE = "console.fabric.diags.madworker"
DEFAULT_TIMEOUT = 10.0
START_TIMEOUT = 10.0
#: ``counters`` masks: what to read for a port (the helper's READ_* bits)
READ_DATA, READ_ERRORS, READ_STATE = 1, 2, 4
READ_ALL = READ_DATA | READ_ERRORS | READ_STATE


class MadError(RuntimeError):
    """The helper failed a request (bad request, broken pipe, garbled reply)."""


class MadUnavailable(MadError):
    """The helper could not start here (no libibmad, no umad port, no python)."""


class MadTimeout(MadError):
    """The helper did not answer within the deadline; it was killed."""


class MadSession:
    """One long-lived MAD helper for one :class:`DiagEnv`; thread-safe, restartable."""

    def __init__(
        self,
        env: DiagEnv,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        start_timeout: float = START_TIMEOUT,
        mode: str | None = None,
        window: int | None = None,
    ) -> None:
        self.env = env
        self.timeout = timeout
        self.start_timeout = start_timeout
        #: "pipelined" (many MADs in flight, the helper's default) or "sync" (one at a time);
        #: ``window``: MADs in flight when pipelined (None: the helper's default)
        self.mode = mode
        self.window = window
        self.proc: subprocess.Popen[bytes] | None = None
        self._pending = bytearray()  # what the helper wrote past the last line read
        self.starts = 0
        #: whether the running helper can pipeline, and does so in madpipe.c's loop (its hello
        #: line says so)
        self.pipelined = False
        self.native = False
        #: ``stats`` of the last reply: mode, mads, retried, failed, seconds
        self.last_stats: dict[str, Any] = {}
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> MadSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        """True while a helper process is running."""
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start the helper unless it runs; raises :class:`MadUnavailable` when it cannot."""
        with self._lock:
            self._ensure()

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        self._kill()
        self._pending = bytearray()
        env = self.env.environ()
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(PROJECT_ROOT) + (os.pathsep + path if path else "")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", MODULE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # own process group: a kill takes everything with it
                cwd=scratch_dir(),  # umad2sim leaves its sys-<pid>/ tree in the cwd
            )
        except OSError as exc:
            raise MadUnavailable(f"cannot start the MAD helper: {exc}") from exc
        self.starts += 1
        try:
            hello = self._read(self.proc, self.start_timeout)
        except MadError as exc:
            self._kill()
            raise MadUnavailable(f"MAD helper did not start: {exc}") from exc
        if not hello.get("ok"):
            self._kill()
            raise MadUnavailable(f"MAD helper failed to start: {hello.get('error')}")
        self.pipelined = bool(hello.get("pipelined"))
        self.native = bool(hello.get("native"))
        return self.proc

    def _read(self, proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
        """The helper's next line, parsed."""
        return self._parse(self._line(proc, timeout))

    def _line(self, proc: subprocess.Popen[bytes], timeout: float) -> bytes:
        """The helper's next line (read here, not through a buffered file: a buffered reader
        could hold the next answer while ``select`` waits on the pipe for more)."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        pending = self._pending
        deadline = time.monotonic() + timeout
        while (end := pending.find(b"\n")) < 0:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                self._kill()
                raise MadTimeout(f"MAD helper gave no answer within {timeout:.1f}s (killed)")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self._kill()
                raise MadError("MAD helper exited")
            pending += chunk
        line = bytes(pending[:end])
        del pending[: end + 1]
        return line

    def _parse(self, line: bytes) -> dict[str, Any]:
        try:
            reply = json.loads(line)
        except ValueError as exc:
            self._kill()
            raise MadError(f"garbled reply from the MAD helper: {line[:200]!r}") from exc
        if not isinstance(reply, dict):
            self._kill()
            raise MadError(f"unexpected reply from the MAD helper: {line[:200]!r}")
        return reply

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            proc.wait(2)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def close(self) -> None:
        """Stop the helper: close its stdin (it exits on EOF), kill it if it lingers."""
        with self._lock:
            proc = self.proc
            if proc is None:
                return
            if proc.poll() is None and proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(1)
            self._kill()

    # -- requests --------------------------------------------------------------------------

    def _prepare(self, request: dict[str, Any]) -> str:
        if self.mode is not None and "mode" not in request:
            request = {**request, "mode": self.mode}
        if self.window is not None and "window" not in request:
            request = {**request, "window": self.window}
        return json.dumps(request) + "\n"

    def request(self, request: dict[str, Any], *, timeout: float | None = None) -> Any:
        """Send one request and return its ``data``; raises MadError / MadTimeout.

        A helper that died since the last request is restarted first (once per request).
        """
        return list(self.stream([request], timeout=timeout))[0]

    def stream(
        self, requests: Iterable[dict[str, Any]], *, timeout: float | None = None, depth: int = 2
    ) -> Iterator[Any]:
        """The ``data`` of each request in turn, with up to ``depth`` requests sent ahead: the
        helper works on request k+1 while the caller handles the answer to request k (its MAD
        window does not drain between requests). Raises MadError / MadTimeout; ``timeout`` is
        per answer. Holds the session until the last answer is read; a caller that stops early
        (or an error) leaves the helper in an unknown state, so it is killed and the next request
        starts a fresh one. The helper answers in order, and at most ``depth`` answers are
        outstanding, so neither pipe can fill up while the other waits. ``requests`` is read
        lazily: a request is built only when it is about to be sent."""
        for line in self.stream_raw(requests, timeout=timeout, depth=depth):
            reply = self._parse(line)
            self.last_stats = reply.get("stats") or {}
            if not reply.get("ok"):
                raise MadError(str(reply.get("error")))
            yield reply.get("data")

    def stream_raw(
        self, requests: Iterable[dict[str, Any] | bytes], *, timeout: float | None = None, depth: int = 2
    ) -> Iterator[bytes]:
        """:meth:`stream`'s exchange, each reply as the helper wrote it (one JSON line, not
        parsed here: an SM host's agent relays them to the console, which parses them once). A
        request may be given as its JSON line already (bytes, no newline), written as it is."""
        deadline = timeout if timeout is not None else self.timeout
        pending = iter(requests)
        more = True
        with self._lock:
            proc = self._ensure()
            assert proc.stdin is not None
            sent = received = 0
            try:
                while more or received < sent:
                    try:
                        while more and sent - received < max(1, depth):
                            request = next(pending, None)
                            if request is None:
                                more = False
                                break
                            line = request + b"\n" if isinstance(request, bytes) else self._prepare(request).encode()
                            proc.stdin.write(line)
                            sent += 1
                        proc.stdin.flush()
                    except (BrokenPipeError, OSError) as exc:
                        self._kill()
                        raise MadError(f"MAD helper gone: {exc}") from exc
                    line = self._line(proc, deadline)
                    received += 1
                    yield line
            finally:
                if received < sent:
                    self._kill()

    def ping(self, *, timeout: float | None = None) -> float:
        """Round trip to the helper in seconds (starts it when needed)."""
        started = time.monotonic()
        self.request({"op": "ping"}, timeout=timeout)
        return time.monotonic() - started

    @staticmethod
    def _ports(ports: Iterable[tuple[int, int]]) -> list[list[int]]:
        return [[int(lid), int(port)] for lid, port in ports]

    def pkeys(
        self,
        ports: Sequence[tuple[int, int]],
        *,
        blocks: Sequence[int] | None = None,
        timeout: float | None = None,
    ) -> list[PkeyTable | None]:
        """P_Key table of each ``(lid, port)``: block 0 (the first 32 keys, where OpenSM puts
        them) or ``blocks[i]`` blocks; None where an SMP failed. On an HCA ``port`` is its CA
        port (1); on a switch the switch port."""
        if not ports:
            return []
        wire = self._ports(ports)
        if blocks is not None:
            wire = [[lid, port, int(n)] for (lid, port), n in zip(wire, blocks, strict=True)]
        data = self.request({"op": "pkeys", "ports": wire}, timeout=timeout)
        if not isinstance(data, list) or len(data) != len(ports):
            raise MadError("MAD helper answered pkeys for a different number of ports")
        return [
            None if entries is None else PkeyTable(tuple(PkeyEntry(int(i), int(raw)) for i, raw in entries), None)
            for entries in data
        ]

    def qos_tables(
        self, ports: Sequence[tuple[int, int, bool, int]], *, timeout: float | None = None
    ) -> list[dict[str, Any] | None]:
        """SL2VL rows (switch output port: from every input port 0..nports) and the first block of
        the low and high VL arbitration tables of each ``(lid, port, switch, nports)``."""
        if not ports:
            return []
        wire = [[int(lid), int(port), int(bool(switch)), int(n)] for lid, port, switch, n in ports]
        data = self.request({"op": "qos", "ports": wire}, timeout=timeout)
        if not isinstance(data, list) or len(data) != len(ports):
            raise MadError("MAD helper answered qos for a different number of ports")
        return data

    def portinfo(
        self, ports: Sequence[tuple[int, int]], *, timeout: float | None = None
    ) -> list[dict[str, Any] | None]:
        """LID, SM LID, logical and physical state of each ``(lid, port)``; None on failure."""
        if not ports:
            return []
        return self.request({"op": "portinfo", "ports": self._ports(ports)}, timeout=timeout)

    def counters(
        self,
        ports: Sequence[tuple[int, int]],
        *,
        masks: Sequence[int] | None = None,
        timeout: float | None = None,
        **options: Any,
    ) -> Any:
        """``[xmit, rcv, errors, state]`` per ``(lid, port)`` (None where the PMA failed).

        ``masks[i]`` picks what is read for port i (:data:`READ_DATA` | :data:`READ_ERRORS` |
        :data:`READ_STATE`, all by default); ``errors`` and ``state`` are None where not read.
        ``options`` go into the request as they are (``mode``, ``window``, ``mad_timeout_ms``,
        ``retries``)."""
        wire = self._ports(ports)
        if masks is not None:
            wire = [[lid, port, int(m)] for (lid, port), m in zip(wire, masks, strict=True)]
        data = self.request({"op": "counters", "ports": wire, **options}, timeout=timeout)
        if not isinstance(data, list) or len(data) != len(ports):
            raise MadError("MAD helper answered counters for a different number of ports")
        return data

    def lft(self, lid: int, top: int, *, timeout: float | None = None) -> list[int] | None:
        """Egress port per destination LID 0..top of the switch at ``lid`` (None on failure)."""
        return self.request({"op": "lft", "lid": int(lid), "top": int(top)}, timeout=timeout)

    def nodeinfo(self, lids: Sequence[int], *, timeout: float | None = None) -> list[dict[str, Any] | None]:
        """NodeInfo through each LID: ``port_guid`` is the GUID of the port owning the LID."""
        if not lids:
            return []
        return self.request({"op": "nodeinfo", "lids": [int(lid) for lid in lids]}, timeout=timeout)

    def sminfo(self, lid: int, *, timeout: float | None = None) -> dict[str, Any] | None:
        """SMInfo of the SM at ``lid`` (guid, act_count, priority, state); None on failure."""
        return self.request({"op": "sminfo", "lid": int(lid)}, timeout=timeout)


# -- sessions shared within a process ---------------------------------------------------------
#
# Starting a helper costs ~0.2 s (Python, ctypes, umad attach), a tenth of a push's budget, so
# a worker keeps one per fabric (DiagEnv) and reuses it across pushes. Bounded: a process that
# talks to many labs (the test suite) closes the least recently used helpers.

MAX_SHARED = 4
_shared: dict[tuple, MadSession] = {}
_shared_lock = threading.Lock()


def env_key(env: DiagEnv) -> tuple:
    """A hashable identity of a DiagEnv (it holds a dict, so it is not hashable itself)."""
    return (env.umad2sim, env.sim_host, env.ibsim_sockname, env.ca, env.ca_port, tuple(sorted(env.extra.items())))


def shared_session(env: DiagEnv, *, timeout: float = DEFAULT_TIMEOUT) -> MadSession:
    """The process-wide session for ``env`` (created, not started: requests start it)."""
    key = env_key(env)
    evicted: list[MadSession] = []
    with _shared_lock:
        session = _shared.pop(key, None)
        if session is None:
            session = MadSession(env, timeout=timeout)
        _shared[key] = session  # most recently used last
        while len(_shared) > MAX_SHARED:
            evicted.append(_shared.pop(next(iter(_shared))))
    for old in evicted:
        old.close()
    return session


def close_shared(predicate: Callable[[DiagEnv], bool] = lambda env: True) -> int:
    """Close the shared sessions whose env matches (a lab closes its own when it stops)."""
    with _shared_lock:
        keys = [k for k, s in _shared.items() if predicate(s.env)]
        closing = [_shared.pop(k) for k in keys]
    for session in closing:
        session.close()
    return len(closing)


atexit.register(close_shared)
