"""BMC drivers: one small protocol, one implementation per management interface."""

from __future__ import annotations

from typing import Protocol

from console.power.models import Bmc


class BmcError(RuntimeError):
    """The BMC could not be reached or refused the request."""


class BmcDriver(Protocol):
    """What power management asks of a BMC. ``status`` answers "on", "off" or the BMC's own word
    for a transition ("poweringon", …) in lower case."""

    def power_on(self) -> None: ...

    def graceful_off(self) -> None: ...

    def force_off(self) -> None: ...

    def status(self) -> str: ...


def driver_for(bmc: Bmc) -> BmcDriver:
    """The driver of ``bmc`` (imported lazily: a console without IPMI nodes never loads pyghmi)."""
    if bmc.driver == Bmc.Driver.REDFISH:
        from console.power.drivers.redfish import RedfishDriver

        return RedfishDriver(bmc)
    if bmc.driver == Bmc.Driver.IPMI:
        from console.power.drivers.ipmi import IpmiDriver

        return IpmiDriver(bmc)
    raise BmcError(f"BMC driver {bmc.driver!r} is not available")
