"""The ``switch`` driver: switch port administration through SMPs (``ibportstate``).

Used to isolate a bad port or shut unused ones. Every operation is set-style: the port is read
first and left alone when it already is in the wanted state, and every change is verified by
reading the port back until it shows the state (or time runs out).

Found in the lab (ibsim 0.10): ``ibportstate disable`` sets PhysLinkState ``Disabled`` while
ibsim keeps reporting LinkState ``Active``; ``enable`` moves it to ``Polling``/``LinkUp``. So
"disabled" is judged on the physical state, which is also what a real switch reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from console.fabric.diags.runner import DiagError, DiagRunner
from console.fabric.drivers.base import DriverError, PortAdmin, PortStateResult


def _is_disabled(phys_state: str) -> bool:
    return phys_state.strip().lower().startswith("disabled")


class SmpPortAdmin:
    """Port enable/disable over SMPs for one fabric, addressed by switch name and port number."""

    name = "switch"

    def __init__(
        self,
        diags: Callable[[], DiagRunner],
        *,
        verify_timeout: float = 10.0,
        poll_interval: float = 0.2,
    ) -> None:
        self._diags = diags
        self._lids: dict[str, int] | None = None
        self.verify_timeout = verify_timeout
        self.poll_interval = poll_interval

    def switch_lid(self, switch: str) -> int:
        """LID of a switch by node description (``leaf3``) or node id, from ibnetdiscover."""
        if self._lids is None:
            topo = self._diags().ibnetdiscover()
            lids: dict[str, int] = {}
            for node in topo.nodes.values():
                if node.is_switch and node.lid is not None:
                    lids[node.node_id] = node.lid
                    if node.description:
                        lids[node.description] = node.lid
            self._lids = lids
        try:
            return self._lids[switch]
        except KeyError:
            raise DriverError(f"no switch {switch!r} on the fabric") from None

    def read(self, switch: str, port: int) -> bool:
        """True when the port is administratively enabled (not Disabled)."""
        info = self._diags().port_state(self.switch_lid(switch), port)
        return not _is_disabled(info.phys_state)

    def set_port_state(self, switch: str, port: int, enabled: bool) -> PortStateResult:
        """Enable/disable ``switch[port]`` unless it already is; verify by reading it back."""
        result = PortStateResult(switch, port, enabled, changed=False, verified=False)
        want = "enabled" if enabled else "disabled"
        try:
            lid = self.switch_lid(switch)
            if self.read(switch, port) == enabled:
                result.verified = True
                result.log.append(f"{switch}[{port}] already {want}")
                return result
            op = "enable" if enabled else "disable"
            run = self._diags().set_port_state(lid, port, op)
            result.changed = True
            result.log.append(f"ibportstate {lid} {port} {op}: exit {run.returncode}")
            deadline = time.monotonic() + self.verify_timeout
            while time.monotonic() < deadline:
                if self.read(switch, port) == enabled:
                    result.verified = True
                    result.log.append(f"{switch}[{port}] reads back {want}")
                    return result
                time.sleep(self.poll_interval)
            result.log.append(f"{switch}[{port}] did not read back {want} in time")
        except DiagError as exc:
            result.log.append(f"{switch}[{port}]: {exc}")
        return result

    def apply(self, wanted: list[PortAdmin]) -> list[PortStateResult]:
        """Apply every wanted port state, in a stable order."""
        return [self.set_port_state(p.switch, p.port, p.enabled) for p in sorted(wanted)]
