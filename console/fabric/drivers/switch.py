"""The ``switch`` driver: switch port administration through SMPs (``ibportstate``).

Used to isolate a bad port or shut unused ones, and to pin a port's enabled link width / speed
(``ibportstate <lid> <port> width|speed <code>``, read back from LinkWidthEnabled /
LinkSpeedEnabled: ibsim 0.10 updates LinkWidthActive only at the port's next change, so the
enabled value is what is verified; it also ignores a LinkSpeedEnabled without the 2.5 Gbps bit,
so ``speed 2``/``speed 4`` fail verification there). Every operation is set-style: the port is read
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
from console.fabric.drivers.base import (
    SPEED_NAMES,
    WIDTH_NAMES,
    DriverError,
    PortAdmin,
    PortStateResult,
    decode_enabled,
)
from designer.imports.model import switch_desc


def _is_disabled(phys_state: str) -> bool:
    return phys_state.strip().lower().startswith("disabled")


class SmpPortAdmin:
    """Port enable/disable, width and speed over SMPs for one fabric, addressed by switch name and port number."""

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
        """LID of a switch by node description (``leaf3``), the design's name an NVIDIA
        description carries (``MF0;su01-leaf-r1:MQM9700/U1`` → ``su01-leaf-r1``) or node id,
        from ibnetdiscover."""
        if self._lids is None:
            topo = self._diags().ibnetdiscover()
            lids: dict[str, int] = {}
            for node in topo.nodes.values():
                if node.is_switch and node.lid is not None:
                    lids[node.node_id] = node.lid
                    if node.description:
                        lids[node.description] = node.lid
                        lids.setdefault(switch_desc(node.description).name, node.lid)
            self._lids = lids
        try:
            return self._lids[switch]
        except KeyError:
            raise DriverError(f"no switch {switch!r} on the fabric") from None

    def read(self, switch: str, port: int) -> bool:
        """True when the port is administratively enabled (not Disabled)."""
        info = self._diags().port_state(self.switch_lid(switch), port)
        return not _is_disabled(info.phys_state)

    def read_state(self, switch: str, port: int) -> tuple[bool, int | None, int | None]:
        """(enabled, LinkWidthEnabled code, LinkSpeedEnabled code) of ``switch[port]``."""
        info = self._diags().port_state(self.switch_lid(switch), port)
        width = decode_enabled(info.fields.get("LinkWidthEnabled", ""), WIDTH_NAMES)
        speed = decode_enabled(info.fields.get("LinkSpeedEnabled", ""), SPEED_NAMES)
        return not _is_disabled(info.phys_state), width, speed

    @staticmethod
    def _differences(
        seen: tuple[bool, int | None, int | None],
        enabled: bool,
        width: int | None,
        speed: int | None,
    ) -> list[tuple[str, int | None]]:
        """The ibportstate operations still needed (width/speed first, then enable/disable)."""
        ops: list[tuple[str, int | None]] = []
        if width is not None and seen[1] != width:
            ops.append(("width", width))
        if speed is not None and seen[2] != speed:
            ops.append(("speed", speed))
        if seen[0] != enabled:
            ops.append(("enable" if enabled else "disable", None))
        return ops

    def set_port_state(
        self,
        switch: str,
        port: int,
        enabled: bool,
        *,
        width: int | None = None,
        speed: int | None = None,
    ) -> PortStateResult:
        """Make ``switch[port]`` enabled/disabled with the wanted enabled width and speed,
        changing only what differs; verify by reading the port back (PhysLinkState,
        LinkWidthEnabled, LinkSpeedEnabled)."""
        result = PortStateResult(switch, port, enabled, changed=False, verified=False)
        want = PortAdmin(switch, port, enabled, width, speed).describe()
        try:
            lid = self.switch_lid(switch)
            ops = self._differences(self.read_state(switch, port), enabled, width, speed)
            if not ops:
                result.verified = True
                result.log.append(f"{switch}[{port}] already {want}")
                return result
            for op, value in ops:
                run = self._diags().set_port_state(lid, port, op, value)
                result.changed = True
                shown = f"{op} {value}" if value is not None else op
                result.log.append(f"ibportstate {lid} {port} {shown}: exit {run.returncode}")
            deadline = time.monotonic() + self.verify_timeout
            while True:
                seen = self.read_state(switch, port)
                if not self._differences(seen, enabled, width, speed):
                    result.verified = True
                    result.log.append(f"{switch}[{port}] reads back {want}")
                    return result
                if time.monotonic() >= deadline:
                    break
                time.sleep(self.poll_interval)
            shown = PortAdmin(switch, port, seen[0], seen[1], seen[2]).describe()
            result.log.append(f"{switch}[{port}] did not read back {want} in time: {shown}")
        except DiagError as exc:
            result.log.append(f"{switch}[{port}]: {exc}")
        return result

    def apply(self, wanted: list[PortAdmin]) -> list[PortStateResult]:
        """Apply every wanted port state, in a stable order."""
        return [self.set_port_state(p.switch, p.port, p.enabled, width=p.width, speed=p.speed) for p in sorted(wanted)]
