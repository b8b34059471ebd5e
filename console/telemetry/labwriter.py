"""Writes the traffic model's counters into ibsim, many ``PerformanceSet`` commands per batch.

``Lab.console`` sends one command and polls the log for its reply (≥ 20 ms each); a sweep of a
busy job touches hundreds of ports, so this writes the whole batch to the console FIFO under the
lab's console lock and waits once for as many prompts as commands. (A ``Lab.console_batch`` in
console/fabric/lab would be the better home; see the report of issue 6.)
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterable, Iterator

from console.fabric.lab.manager import Lab
from console.fabric.lab.spec import LabError

PROMPT = "sim> "


def console_batch(lab: Lab, commands: Iterable[str], *, timeout: float = 10.0) -> int:
    """Send ``commands`` to ibsim's console; returns how many it acknowledged."""
    lines = [c for c in commands if c and "\n" not in c]
    if not lines:
        return 0
    workdir = lab.workdir
    with open(workdir / ".console.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            log = workdir / "ibsim.log"
            offset = log.stat().st_size
            payload = ("\n".join(lines) + "\n").encode()
            try:
                fd = os.open(workdir / "console.fifo", os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                raise LabError(f"ibsim console not reachable: {exc}") from exc
            deadline = time.monotonic() + timeout
            try:
                while payload:
                    try:
                        sent = os.write(fd, payload[:4096])
                        payload = payload[sent:]
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            raise LabError("ibsim console FIFO stayed full") from None
                        time.sleep(0.002)
            finally:
                os.close(fd)
            seen = 0
            while time.monotonic() < deadline:
                with open(log, "rb") as fh:
                    fh.seek(offset)
                    seen = fh.read().decode(errors="replace").count(PROMPT)
                if seen >= len(lines):
                    return seen
                time.sleep(0.005)
            raise LabError(f"ibsim acknowledged {seen} of {len(lines)} console commands")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def counter_commands(node_ids: dict[str, str], values: dict[tuple[str, int], tuple[int, int]]) -> Iterator[str]:
    """PerformanceSet lines setting the extended data counters of switch ports."""
    for (switch, port), (xmit, rcv) in sorted(values.items()):
        node = node_ids[switch]
        yield f'PerformanceSet "{node}"[{port}] PortCountersExtended.PortXmitData={xmit}'
        yield f'PerformanceSet "{node}"[{port}] PortCountersExtended.PortRcvData={rcv}'
