"""The driver registry: ``Fabric.driver`` picks the driver; every choice has one registered."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from console.fabric.drivers import DriverUnavailable, driver_for, registered_drivers
from console.fabric.drivers.opensm import OpenSmDriver
from console.fabric.drivers.ufm import UfmDriver
from console.fabric.models import Fabric


def fabric(driver: str, config: dict | None = None) -> SimpleNamespace:
    return SimpleNamespace(driver=driver, config=config)


def test_every_driver_choice_is_registered():
    assert registered_drivers() == tuple(sorted(Fabric.Driver.values))


def test_driver_for_builds_the_registered_driver(tmp_path):
    assert isinstance(driver_for(fabric("ufm", {"url": "https://ufm.example"})), UfmDriver)
    opensm = driver_for(fabric("opensm", {"directory": str(tmp_path), "diag_timeout": 2}))
    assert isinstance(opensm, OpenSmDriver)


def test_a_driver_factory_reports_missing_configuration():
    with pytest.raises(DriverUnavailable, match="config.url"):
        driver_for(fabric("ufm", {}))


def test_an_unknown_driver_is_a_clear_error():
    with pytest.raises(
        DriverUnavailable, match=r"unknown driver 'sharp-gw' \(registered drivers: agent, lab, opensm, ufm\)"
    ):
        driver_for(fabric("sharp-gw"))
