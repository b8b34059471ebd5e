"""Fabric drivers: how the push pipeline reaches a fabric (lab, OpenSM host, switch SMPs, UFM)."""

from __future__ import annotations

from typing import Any

from console.fabric.drivers.base import (
    DesiredFabric,
    DriverError,
    DriverUnavailable,
    FabricDriver,
    PortAdmin,
    PortStateResult,
)

__all__ = [
    "DesiredFabric",
    "DriverError",
    "DriverUnavailable",
    "FabricDriver",
    "PortAdmin",
    "PortStateResult",
    "driver_for",
]


def driver_for(fabric: Any) -> FabricDriver:
    """The driver ``fabric.driver`` names, configured from ``fabric.config``."""
    config = fabric.config or {}
    diag_timeout = float(config.get("diag_timeout", 5.0))
    if fabric.driver == "lab":
        from console.fabric.drivers.lab import LabDriver, lab_for

        return LabDriver(lab_for(fabric), diag_timeout=diag_timeout)
    if fabric.driver == "opensm":
        from console.fabric.drivers.opensm import LocalOpenSmHost, OpenSmDriver

        return OpenSmDriver(LocalOpenSmHost(config), diag_timeout=diag_timeout)
    if fabric.driver == "ufm":
        from console.fabric.drivers.ufm import UfmDriver

        return UfmDriver.from_config(config)
    raise DriverUnavailable(f"unknown driver {fabric.driver!r}")
