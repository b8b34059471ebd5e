"""ibsim's console: commands written to ``console.fifo``, replies read back from ``ibsim.log``.

ibsim's console resolves only node *ids* (``Unlink "S-0002c90300001000"[5]``); the node
description (``"leaf1"``) answers ``# nodeid "leaf1" (leaf1) not found``. One command at a time
per workdir, across processes (a file lock), because replies are found by their offset in the log.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

from console.fabric.lab.spec import LabError
from console.fabric.lab.state import proc_start_time

IBSIM_READY = "Network simulator ready"
PROMPT = "sim> "
#: Words of ibsim's free-text failures (it answers success silently or with "has been set to").
REFUSALS = ("not found", "bad ", "invalid", "failed", "can't", "cannot", "usage", "unknown")


def read_log(workdir: Path, offset: int = 0) -> str:
    """ibsim's console output from ``offset`` on ("" before it wrote any)."""
    try:
        with open(workdir / "ibsim.log", "rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


@contextlib.contextmanager
def _console_lock(workdir: Path) -> Iterator[None]:
    with open(workdir / ".console.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def send_command(workdir: Path, command: str, *, timeout: float = 5.0) -> str:
    """Send one command to the console of the ibsim running in ``workdir``; its reply (text
    before the prompt)."""
    if "\n" in command:
        raise ValueError("one command at a time")
    with _console_lock(workdir):
        offset = (workdir / "ibsim.log").stat().st_size
        try:
            fd = os.open(workdir / "console.fifo", os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise LabError(f"ibsim console not reachable: {exc}") from exc
        try:
            os.write(fd, (command + "\n").encode())
        finally:
            os.close(fd)
        deadline = time.monotonic() + timeout
        while True:
            reply = read_log(workdir, offset)
            if PROMPT in reply:
                _bound_log(workdir)
                return reply.split(PROMPT, 1)[0].strip()
            if time.monotonic() > deadline:
                raise LabError(f"no reply from ibsim console to {command!r}")
            time.sleep(0.02)


#: ibsim echoes every command (the traffic model sets counters each second: about 95 MB an
#: hour). Past this size its log is cut (about every 30 s in the demo), its last
#: :data:`LOG_KEEP_BYTES` kept in ``ibsim.log.1``: a lab's logs stay under 1 MB.
LOG_MAX_BYTES = 768 * 1024
LOG_KEEP_BYTES = 64 * 1024


def _bound_log(workdir: Path) -> None:
    """Cut ``ibsim.log`` when it is over :data:`LOG_MAX_BYTES` (under the console lock: no reply
    is being looked for by its offset). ibsim holds the file open for appending (O_APPEND), so
    it goes on writing at the new end."""
    path = workdir / "ibsim.log"
    size = path.stat().st_size
    if size <= LOG_MAX_BYTES:
        return
    with open(path, "rb") as fh:
        fh.seek(max(0, size - LOG_KEEP_BYTES))
        (workdir / "ibsim.log.1").write_bytes(fh.read())
    os.truncate(path, 0)


def refused(reply: str) -> bool:
    """Whether ibsim refused a port command.

    Lines starting "ibwarn:" are ibsim's own diagnostics, not a refusal: an Unlink of the port the
    switch routes traps through prints "send_trap: routing failed: no route to dest lid N" and
    still unlinks the port.
    """
    verdict = "\n".join(line for line in reply.lower().splitlines() if not line.startswith("ibwarn:"))
    return any(w in verdict for w in REFUSALS)


#: ibsim's client slots (``IBSIM_MAX_CLIENTS`` in its ``ibsim.h``): OpenSM, MAD helpers and diags take one each.
IBSIM_MAX_CLIENTS = 10
#: A line of ibsim's ``Attached``: ``Client 3: pid 4242 connected at "host1" port 0x…``.
ATTACHED = re.compile(r"^Client (\d+): pid (\d+) ", re.MULTILINE)


def attached(workdir: Path) -> list[tuple[int, int]]:
    """ibsim's clients: (client slot, process id) each."""
    return [(int(slot), int(pid)) for slot, pid in ATTACHED.findall(send_command(workdir, "Attached"))]


def reap_dead_clients(workdir: Path, settle_s: float = 0.5) -> list[int]:
    """Disconnect the clients whose process is gone (or a zombie); returns their process ids.

    ibsim has ten client slots (``IBSIM_MAX_CLIENTS``) and frees one when its client says goodbye
    or when a write to it fails. A diag or MAD helper killed with SIGKILL says nothing, so its
    slot stays taken until a packet happens to be addressed to it. Once all ten are taken, every
    new diag fails with ``sim_init: connect failed``.

    A client that exited normally may still be listed while ibsim has its goodbye unread; freeing
    its slot then would let that late goodbye disconnect whichever new client took the slot. So a
    slot is freed only when the same dead process still holds it ``settle_s`` later."""
    suspects = {(slot, pid) for slot, pid in attached(workdir) if proc_start_time(pid) is None}
    if not suspects:
        return []
    time.sleep(settle_s)  # ibsim reads the goodbyes already sent meanwhile
    gone = []
    for slot, pid in attached(workdir):
        if (slot, pid) in suspects and proc_start_time(pid) is None:
            send_command(workdir, f"X {slot}")
            gone.append(pid)
    return gone
