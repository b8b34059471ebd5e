"""The ``lab`` driver: the OpenSM driver pointed at a running lab fabric (OpenSM on ibsim).

The lab of a fabric is found through ``console.fabric.lab.fabrics.lab_for(fabric)``, which attaches to
``Lab.attach(fabric.config["workdir"])``; until that module exists the same attach is done here.
"""

from __future__ import annotations

from typing import Any

from console.fabric.drivers.base import DriverUnavailable
from console.fabric.drivers.opensm import LabHost, OpenSmDriver
from console.fabric.drivers.registry import diag_timeout_of, register_driver
from console.fabric.lab.manager import Lab
from console.fabric.lab.spec import LabError


def lab_for(fabric: Any) -> Lab:
    """The running lab of ``fabric``; raises :class:`DriverUnavailable` when there is none."""
    try:
        from console.fabric.lab import fabrics as labs  # written alongside; optional until it lands
    except ImportError:
        labs = None
    if labs is not None and hasattr(labs, "lab_for"):
        not_running = getattr(labs, "LabNotRunning", LabError)
        try:
            return labs.lab_for(fabric)
        except (not_running, LabError) as exc:
            raise DriverUnavailable(f"lab of fabric {fabric} is not running: {exc}") from exc
    workdir = (fabric.config or {}).get("workdir")
    if not workdir:
        raise DriverUnavailable(f"fabric {fabric} has no lab (config.workdir is not set)")
    try:
        lab = Lab.attach(workdir)
    except LabError as exc:
        raise DriverUnavailable(str(exc)) from exc
    if not lab.is_running():
        raise DriverUnavailable(f"lab of fabric {fabric} in {workdir} is not running")
    return lab


class LabDriver(OpenSmDriver):
    """OpenSM on ibsim, controlled through the lab manager."""

    name = "lab"

    def __init__(self, lab: Lab, *, diag_timeout: float = 5.0) -> None:
        super().__init__(LabHost(lab), diag_timeout=diag_timeout)
        self.lab = lab


@register_driver("lab")
def lab_driver(fabric: Any) -> LabDriver:
    """The driver of a lab fabric: its running lab, attached."""
    return LabDriver(lab_for(fabric), diag_timeout=diag_timeout_of(fabric.config or {}))
