"""The driver registry: ``Fabric.driver`` → the factory that builds that fabric's driver.

Each driver module registers its factory with :func:`register_driver` when it is imported
(``console.fabric.drivers`` imports them all); :func:`driver_for` looks the key up. A new driver
is one module with its factory registered, and its key in ``Fabric.Driver``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from console.fabric.drivers.base import DriverUnavailable, FabricDriver

#: Builds the driver of a fabric (``fabric.config`` holds its settings).
DriverFactory = Callable[[Any], FabricDriver]

_FACTORIES: dict[str, DriverFactory] = {}


def register_driver(key: str) -> Callable[[DriverFactory], DriverFactory]:
    """Register the decorated factory for fabrics whose ``driver`` is ``key``."""

    def decorate(factory: DriverFactory) -> DriverFactory:
        if key in _FACTORIES:
            raise ValueError(f"driver {key!r} is already registered")
        _FACTORIES[key] = factory
        return factory

    return decorate


def registered_drivers() -> tuple[str, ...]:
    """The registered driver keys, sorted."""
    return tuple(sorted(_FACTORIES))


def driver_for(fabric: Any) -> FabricDriver:
    """The driver ``fabric.driver`` names, configured from ``fabric.config``."""
    factory = _FACTORIES.get(fabric.driver)
    if factory is None:
        known = ", ".join(registered_drivers()) or "none"
        raise DriverUnavailable(f"unknown driver {fabric.driver!r} (registered drivers: {known})")
    return factory(fabric)


def diag_timeout_of(config: Mapping[str, Any]) -> float:
    """Seconds a diagnostic command may take (``config["diag_timeout"]``, default 5)."""
    return float(config.get("diag_timeout", 5.0))
