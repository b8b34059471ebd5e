"""Fabric drivers: how the push pipeline reaches a fabric (lab, OpenSM host, switch SMPs, UFM).

:func:`driver_for` picks a fabric's driver from the registry keyed by ``Fabric.driver``
(:mod:`.registry`); each driver module registers its factory.
"""

from __future__ import annotations

# The driver modules register themselves with the registry on import.
from console.fabric.drivers import agent, lab, opensm, ufm
from console.fabric.drivers.base import (
    DesiredFabric,
    DriverError,
    DriverUnavailable,
    FabricDriver,
    PortAdmin,
    PortStateResult,
)
from console.fabric.drivers.registry import driver_for, register_driver, registered_drivers

__all__ = [
    "DesiredFabric",
    "agent",
    "DriverError",
    "DriverUnavailable",
    "FabricDriver",
    "PortAdmin",
    "PortStateResult",
    "driver_for",
    "lab",
    "opensm",
    "register_driver",
    "registered_drivers",
    "ufm",
]
