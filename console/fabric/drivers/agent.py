"""The ``agent`` driver: a fabric whose subnet-manager host runs the console's agent.

Every operation is the OpenSM driver's, run by the agent on its host
(:mod:`console.fabric.agents.runtime`) and reached through :mod:`console.fabric.agents.rpc`:
the web tier and the central workers touch no OpenSM file and send no MAD. The agent's steps
arrive as they start, so the pipeline renews its lease and shows them live.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from console.fabric.agents import rpc, wire
from console.fabric.drivers.base import DesiredFabric, DriverError, PortStateResult, Progress, no_progress
from console.fabric.drivers.registry import register_driver
from console.fabric.opensm import ha
from console.fabric.opensm.conf import parse_opensm_conf
from console.fabric.opensm.isolation_audit import AuditPlan, ProbeResult
from console.fabric.opensm.push_types import PushOptions, PushResult, PushStep


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
        """The push on the master's SM host (verified on the ports), then the same files on every
        other SM host (``standby:<name>`` steps: written and reloaded, or pending on a host whose
        agent is away: it gets them when it returns). Each host gets its own priority
        (:mod:`console.fabric.opensm.ha`)."""
        options = options or PushOptions()
        hosts = rpc.sm_hosts(self.fabric)
        every = _polled(self.fabric, options)
        master = replace(every, sm_priority=ha.priority_for(master=True, all_in_step=hosts.in_step()), standby=False)
        standby = replace(every, sm_priority=ha.STANDBY_PRIORITY, standby=True)
        # A new sm_key (the console's first push to a fabric, a key rotation) restarts every
        # OpenSM, and no order is safe while both run: a standby on the other key than the master
        # cannot trust its SMInfo, takes over within its polling timeout and programs the ports
        # from the files it has. So the standbys' OpenSMs are stopped for it (where the host can
        # stop one: a lab's can), the master pushes and verifies, and each standby starts again
        # on the new files and key, as a standby.
        stopped: list[Any] = []
        if hosts.others and self._new_sm_key(hosts.master, every):
            for agent in hosts.others:
                try:
                    rpc.call(agent, "sm_stop", {}, timeout=30)
                    stopped.append(agent)
                except (rpc.AgentLost, DriverError):
                    pass  # this host cannot stop its OpenSM: the usual order
        try:
            result = _pushed(
                hosts.master,
                rpc.call(hosts.master, "push", self._payload(desired, previous, master), progress=progress),
            )
        except BaseException:
            self._start(stopped)
            raise
        if not result.ok:
            self._start(stopped)
            return result
        for agent in hosts.others:
            progress(f"standby:{agent.name}", "running")
            result.steps.append(self._stage(agent, self._payload(desired, previous, standby)))
        if stopped:
            result.steps.append(self._start(stopped))
        for agent in hosts.away:
            step = PushStep(f"standby:{agent.name}", status="pending")
            step.log.append(f"pending on {agent.name}: its agent is not connected; it gets this change when it returns")
            result.steps.append(step)
        return result

    @staticmethod
    def _start(agents: list[Any]) -> PushStep:
        """Start the OpenSMs stopped for a key change (their files as they are now)."""
        step = PushStep("standbys-started", status="ok")
        for agent in agents:
            try:
                state = rpc.call(agent, "sm_start", {}, timeout=60).get("sm", {}).get("state")
                step.log.append(f"{agent.name}: OpenSM started again ({state or 'state unknown'}) on the new sm_key")
            except (rpc.AgentLost, DriverError) as exc:
                step.status = "pending"
                step.log.append(f"{agent.name}: OpenSM not started again: {exc}")
        return step

    @staticmethod
    def _new_sm_key(master: Any, options: PushOptions) -> bool:
        """True when this push gives the master's OpenSM another sm_key than it runs (its live
        opensm.conf read through its agent); False when it cannot be read (the usual order)."""
        if options.keys is None:
            return False
        try:
            live = rpc.call(master, "read_live", {}, timeout=10)["files"].get("opensm.conf") or ""
        except (rpc.AgentLost, DriverError, KeyError):
            return False
        running = parse_opensm_conf(live).get("sm_key") or "0x1"  # OpenSM's default
        try:
            return int(running, 16) != options.keys.sm_key
        except ValueError:
            return True

    @staticmethod
    def _payload(desired: DesiredFabric, previous: DesiredFabric | None, options: PushOptions) -> dict[str, Any]:
        return {"desired": _json(desired), "previous": _json(previous), "options": wire.options_to_json(options)}

    @staticmethod
    def _stage(agent: Any, payload: dict[str, Any]) -> PushStep:
        """The change written on one more SM host: its step (``pending`` when it cannot take it now)."""
        step = PushStep(f"standby:{agent.name}", status="running")
        started = time.monotonic()
        try:
            staged = _pushed(agent, rpc.call(agent, "push", payload))
        except (rpc.AgentLost, DriverError) as exc:
            step.status = "pending"
            step.log.append(f"pending on {agent.name}: {exc}")
        else:
            step.status = "ok" if staged.ok else "failed"
            step.log.append(f"{agent.name}: {staged.outcome}")
            step.log += [line for s in staged.steps for line in s.log][:20]
        step.duration_s = round(time.monotonic() - started, 3)
        return step

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


def _pushed(agent: Any, answer: dict[str, Any]) -> PushResult:
    """A host's push result; what its files hash to now is noted at once (its next heartbeat
    would say so a few seconds later: the HA check must not take it for out of step)."""
    config = answer.get("config") or {}
    if isinstance(config.get("hash"), str):
        rpc.note_config(agent, config)
    return wire.result_from_json(answer)


def _polled(fabric: Any, options: PushOptions) -> PushOptions:
    """``options`` with the SMInfo polling every SM host gets: the console's, or
    ``Fabric.config``'s ``sminfo_polling_ms`` / ``polling_retries`` (:mod:`console.fabric.opensm.ha`)."""
    ms, retries = ha.polling(getattr(fabric, "config", None))
    return replace(options, sminfo_polling_ms=ms, polling_retries=retries)


@register_driver("agent")
def agent_driver(fabric: Any) -> AgentDriver:
    """The driver of a fabric reached through its agent."""
    return AgentDriver(fabric)
