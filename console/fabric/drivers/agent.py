"""The ``agent`` driver: a fabric whose subnet-manager host runs the console's agent.

Every operation is the OpenSM driver's, run by the agent on its host
(:mod:`console.fabric.agents.runtime`) and reached through :mod:`console.fabric.agents.rpc`:
the web tier and the central workers touch no OpenSM file and send no MAD. The agent's steps
arrive as they start, so the pipeline renews its lease and shows them live.
"""

from __future__ import annotations

from typing import Any

from console.fabric.agents import rpc, wire
from console.fabric.drivers.base import DesiredFabric, PortStateResult, Progress, no_progress
from console.fabric.drivers.registry import register_driver
from console.fabric.opensm.isolation_audit import AuditPlan, ProbeResult
from console.fabric.opensm.push_types import PushOptions, PushResult


def _json(state: DesiredFabric | None) -> Any:
    if state is None:
        return None
    if state.source is None:
        raise ValueError("the agent driver sends desired state as the JSON it was read from")
    return dict(state.source)


class AgentDriver:
    """Push, verify, read and probe through the fabric's agent."""

    name = "agent"

    def __init__(self, fabric: Any) -> None:
        self.fabric = fabric

    def push(
        self,
        desired: DesiredFabric,
        *,
        previous: DesiredFabric | None = None,
        options: PushOptions | None = None,
        progress: Progress = no_progress,
    ) -> PushResult:
        payload = {
            "desired": _json(desired),
            "previous": _json(previous),
            "options": wire.options_to_json(options or PushOptions()),
        }
        return wire.result_from_json(rpc.call(self.fabric, "push", payload, progress=progress))

    def verify(self, desired: DesiredFabric, *, options: PushOptions | None = None) -> list[str]:
        payload = {"desired": _json(desired), "options": wire.options_to_json(options or PushOptions())}
        return list(rpc.call(self.fabric, "verify", payload)["mismatches"])

    def read_live(self) -> dict[str, str]:
        return dict(rpc.call(self.fabric, "read_live", {}, timeout=30)["files"])

    def read_applied(self) -> dict[str, str]:
        files = self.read_live()
        return {name: text for name, text in files.items() if name in ("partitions.conf", "qos-policy.conf")}

    def probe_isolation(self, plan: AuditPlan, *, options: PushOptions | None = None) -> ProbeResult:
        payload = {"plan": wire.plan_to_json(plan), "options": wire.options_to_json(options or PushOptions())}
        return wire.probe_from_json(rpc.call(self.fabric, "probe_isolation", payload, timeout=90))

    def set_port_state(
        self, switch: str, port: int, enabled: bool, *, width: int | None = None, speed: int | None = None
    ) -> PortStateResult:
        payload = {"switch": switch, "port": port, "enabled": enabled, "width": width, "speed": speed}
        return wire.port_state_from_json(rpc.call(self.fabric, "set_port_state", payload, timeout=60))


@register_driver("agent")
def agent_driver(fabric: Any) -> AgentDriver:
    """The driver of a fabric reached through its agent."""
    return AgentDriver(fabric)
