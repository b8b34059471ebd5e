"""Redfish through OpenStack's sushy: ComputerSystem.Reset (On, GracefulShutdown, ForceOff) and
the system's PowerState."""

from __future__ import annotations

from typing import Any

import sushy
from sushy import auth as sushy_auth
from sushy.exceptions import SushyError

from console.power.drivers.base import BmcError
from console.power.models import Bmc

#: seconds; a BMC that does not answer within this is reported, not waited for
TIMEOUT_S = 10


class RedfishDriver:
    """One Redfish ComputerSystem behind a BMC."""

    def __init__(self, bmc: Bmc) -> None:
        self.bmc = bmc

    def _system(self) -> Any:  # sushy System
        bmc = self.bmc
        base = bmc.address.rstrip("/")
        try:
            root = sushy.Sushy(
                base,
                auth=sushy_auth.BasicAuth(username=bmc.username, password=bmc.password),
                verify=bmc.verify_tls,
                read_timeout=TIMEOUT_S,
                connect_timeout=TIMEOUT_S,
                server_side_retries=0,
            )
            return root.get_system(bmc.system_id or None)
        except (SushyError, OSError) as exc:
            raise BmcError(f"Redfish BMC {base}: {exc}") from exc

    def _reset(self, reset: sushy.ResetType) -> None:
        system = self._system()
        try:
            system.reset_system(reset)
        except (SushyError, OSError) as exc:
            raise BmcError(f"Redfish {reset.value} on {self.bmc.address}: {exc}") from exc

    def power_on(self) -> None:
        self._reset(sushy.ResetType.ON)

    def graceful_off(self) -> None:
        self._reset(sushy.ResetType.GRACEFUL_SHUTDOWN)

    def force_off(self) -> None:
        self._reset(sushy.ResetType.FORCE_OFF)

    def status(self) -> str:
        state = self._system().power_state
        return str(state.value).lower() if state is not None else "unknown"
