"""The ``lab`` driver: a lab fabric's SM host is one like any other, reached through its agent.

The console starts the lab's ibsim and OpenSM (:mod:`console.fabric.lab`, the process manager)
and the agent on it (:func:`console.fabric.lab.agent.start_lab_agent`); every push,
verification, audit, discovery and counter read goes through that agent, as on a real SM host.
"""

from __future__ import annotations

from typing import Any

from console.fabric.drivers.agent import AgentDriver
from console.fabric.drivers.registry import register_driver


@register_driver("lab")
def lab_driver(fabric: Any) -> AgentDriver:
    """The agent driver: the lab's agent speaks for its SM host."""
    return AgentDriver(fabric)
