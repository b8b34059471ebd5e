"""The ``lab`` driver: the OpenSM driver pointed at a running lab fabric (OpenSM on ibsim).

The lab of a fabric is found through ``console.fabric.lab.fabrics.lab_for(fabric)``, which attaches to
``Lab.attach(fabric.config["workdir"])``.
"""

from __future__ import annotations

from typing import Any

from console.fabric.drivers.agent import AgentDriver
from console.fabric.drivers.base import DriverUnavailable
from console.fabric.drivers.opensm import LabHost, OpenSmDriver
from console.fabric.drivers.registry import diag_timeout_of, register_driver
from console.fabric.lab import fabrics
from console.fabric.lab.manager import Lab
from console.fabric.lab.spec import LabError


def lab_for(fabric: Any) -> Lab:
    """The running lab of ``fabric``; raises :class:`DriverUnavailable` when there is none."""
    try:
        return fabrics.lab_for(fabric)
    except LabError as exc:  # LabNotRunning is one too
        raise DriverUnavailable(f"lab of fabric {fabric} is not running: {exc}") from exc


class LabDriver(OpenSmDriver):
    """OpenSM on ibsim, controlled through the lab manager."""

    name = "lab"

    def __init__(self, lab: Lab, *, diag_timeout: float = 5.0) -> None:
        super().__init__(LabHost(lab), diag_timeout=diag_timeout)
        self.lab = lab


@register_driver("lab")
def lab_driver(fabric: Any) -> LabDriver | AgentDriver:
    """The driver of a lab fabric: its running lab, attached; or, when the lab's SM host runs an
    agent (``config["agent"]``, set by ``manage.py up``), the agent driver: the lab is then an
    SM host like any other."""
    if fabric.through_agent:
        return AgentDriver(fabric)
    return LabDriver(lab_for(fabric), diag_timeout=diag_timeout_of(fabric.config or {}))
