"""BMC drivers: one small protocol, one implementation per management interface."""

from __future__ import annotations

from console.power.drivers.base import BmcDriver, BmcError
from console.power.models import Bmc

__all__ = ["BmcDriver", "BmcError", "driver_for"]


def driver_for(bmc: Bmc) -> BmcDriver:
    """The driver of ``bmc`` (imported lazily: only the drivers in use are loaded)."""
    if bmc.driver == Bmc.Driver.REDFISH:
        from console.power.drivers.redfish import RedfishDriver

        return RedfishDriver(bmc)
    if bmc.driver == Bmc.Driver.IPMI:
        from console.power.drivers.ipmi import IpmiDriver

        return IpmiDriver(bmc)
    raise BmcError(f"BMC driver {bmc.driver!r} is not available")
