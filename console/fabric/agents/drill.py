"""The subnet-manager failover drill (``manage.py fabric failover-drill``).

On a lab fabric it is real: every member port's P_Key and QoS tables are read through the
master's agent, the master's OpenSM is killed through its agent, the standby's own SMInfo is
polled through its agent until it answers MASTER (detection: it left STANDBY; takeover: MASTER),
the new master's first sweep is waited for, the tables are read again through the new master's
agent and compared, the priorities are pushed (the change the takeover starts, run here when no
worker has yet) and the old master's OpenSM is started again: it must come back STANDBY.

On any other fabric (or with ``dry_run``) it touches nothing: it checks each standby's readiness
(its agent connected, its OpenSM answering STANDBY, the same files as the master, the console's
SMInfo polling and a priority below the master's).
"""

from __future__ import annotations

import os
import time
from typing import Any

from django.db import transaction

from console.fabric.agents import rpc
from console.fabric.agents.services import out_of_step
from console.fabric.changes.desired import applied_of
from console.fabric.changes.pipeline import RUNNING, TRANSIENT, apply_change
from console.fabric.changes.requests import OPEN, reconcile
from console.fabric.drivers.base import DriverError
from console.fabric.models import AGENT_DRIVERS, Fabric, FabricAgent
from console.fabric.opensm import drill, ha
from console.fabric.opensm.conf import parse_opensm_conf
from console.fabric.opensm.push_types import PushOptions
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid
from console.tenancy.models import Principal
from console.tenancy.permissions import require_operator

POLL_S = 0.1


def failover_drill(
    actor: Actor, principal: Principal, fabric: Fabric, *, dry_run: bool = False, timeout: float = 60.0
) -> dict[str, Any]:
    """Run the drill (see the module docstring); its report, audited as ``fabric.failover_drill``."""
    require_operator(principal, to="run failover drills")
    if fabric.driver not in AGENT_DRIVERS:
        raise Invalid(f"fabric {fabric.name} is not reached through agents: its SM hosts cannot be drilled")
    running = fabric.changes.filter(status__in=RUNNING).order_by("pk").first()
    if running is not None:
        raise Conflict(f"change {running.pk} of {fabric.name} is being pushed: run the drill when it is done")
    try:
        hosts = rpc.sm_hosts(fabric)
    except rpc.AgentLost as exc:
        raise Conflict(f"no master to drill: {exc}") from exc
    standbys = [_readiness(fabric, hosts.master, a) for a in hosts.others] + [
        {"name": a.name, "ready": False, "problems": ["its agent is not connected"]} for a in hosts.away
    ]
    report: dict[str, Any] = {
        "fabric": fabric.name,
        "mode": "dry-run" if dry_run or fabric.driver != Fabric.Driver.LAB else "lab",
        "master": hosts.master.name,
        "standbys": standbys,
        "ready": any(s["ready"] for s in standbys),
    }
    if report["mode"] == "lab":
        ready = [a for a, s in zip(hosts.others, standbys, strict=False) if s["ready"]]
        if not ready:
            raise Conflict(f"no standby of {fabric.name} is ready: {standbys}")
        report.update(_drill(actor, fabric, hosts.master, ready[0], timeout))
    with transaction.atomic():
        audit.record(actor, "fabric.failover_drill", fabric, after=report)
    return report


def _readiness(fabric: Fabric, master: FabricAgent, agent: FabricAgent) -> dict[str, Any]:
    """What keeps a standby from taking over cleanly (nothing: ready)."""
    problems = []
    state = _settled_state(agent)
    if state != "STANDBY":
        problems.append(f"its OpenSM is {state or 'not reported'}, not STANDBY")
    if agent.config_hash != master.config_hash or not agent.config_hash:
        problems.append("its files differ from the master's (a push to it is pending)")
    try:
        conf = parse_opensm_conf(rpc.call(agent, "read_live", {}, timeout=15)["files"].get("opensm.conf") or "")
    except (rpc.AgentLost, DriverError) as exc:
        problems.append(f"its files cannot be read: {exc}")
        conf = {}
    ms, retries = ha.polling(fabric.config)
    wanted = PushOptions(sminfo_polling_ms=ms, polling_retries=retries).ha_options()  # what a push writes
    for key, value in wanted.items():
        if conf and conf.get(key) != value:
            problems.append(f"{key} is {conf.get(key)}, the console sets {value}")
    if conf and int(conf.get("sm_priority") or 0) >= int(master.sm_priority or 0):
        problems.append(f"its priority {conf.get('sm_priority')} does not stay below the master's {master.sm_priority}")
    return {"name": agent.name, "host": agent.host, "ready": not problems, "problems": problems}


def _settled_state(agent: FabricAgent, tries: int = 10) -> str:
    """The standby's own SMInfo state, asked through its agent now: a standby re-sweeps after a
    SIGHUP (DISCOVERING for a moment), so that state is asked again for up to ``tries`` seconds."""
    state = ""
    for _ in range(tries):
        try:
            state = str(rpc.call(agent, "sminfo", {}, timeout=5).get("state") or "")
        except (rpc.AgentLost, DriverError) as exc:
            return f"not reachable ({exc})"
        if state != "DISCOVERING":
            return state
        time.sleep(1.0)
    return state


def _drill(actor: Actor, fabric: Fabric, master: FabricAgent, standby: FabricAgent, timeout: float) -> dict[str, Any]:
    applied = applied_of(fabric)
    guids = [f"{g:#018x}" for g in drill.member_guids(applied.desired if applied else {})]
    before = rpc.call(master, "port_tables", {"guids": guids}, timeout=120)["ports"]
    mark = int(rpc.call(standby, "routing", {}, timeout=15).get("mark", -1))
    killed = time.monotonic()
    rpc.call(master, "sm_stop", {}, timeout=30)
    detection = takeover = None
    while takeover is None:
        elapsed = time.monotonic() - killed
        if elapsed > timeout:
            raise Conflict(f"{standby.name} did not take over within {timeout:.0f} s (the master is stopped)")
        state = rpc.call(standby, "sminfo", {}, timeout=5).get("state")
        if state != "STANDBY" and detection is None:
            detection = elapsed
        if state == "MASTER":
            takeover = elapsed
        time.sleep(POLL_S)
    while mark >= 0 and not rpc.call(standby, "swept_since", {"mark": mark}, timeout=10).get("swept"):
        if time.monotonic() - killed > timeout * 2:
            raise Conflict(f"{standby.name} is master but did not finish its first sweep")
        time.sleep(POLL_S)
    after = rpc.call(standby, "port_tables", {"guids": guids}, timeout=120)["ports"]
    synced = _sync(actor, fabric, standby, timeout)
    back = rpc.call(master, "sm_start", {}, timeout=120)["sm"].get("state") if synced else None
    return {
        "new_master": standby.name,
        "detection_s": round(detection if detection is not None else takeover, 3),
        "takeover_s": round(takeover, 3),
        "ports_checked": len(guids),
        "differences": drill.differences(before, after),
        "old_master": back or "left stopped: the priorities were not pushed in time",
    }


def _sync(actor: Actor, fabric: Fabric, new_master: FabricAgent, timeout: float) -> bool:
    """Push the priorities the takeover calls for (a worker may be doing it: its lease wins) and
    return once every connected SM host is in step; False after ``timeout``."""
    deadline = time.monotonic() + timeout
    worker = f"drill-{os.getpid()}"
    while time.monotonic() < deadline:
        if FabricAgent.objects.filter(pk=new_master.pk, sm_state="MASTER").exists() and not out_of_step(fabric):
            return True
        change = reconcile(fabric, actor=actor) or fabric.changes.filter(status__in=OPEN).order_by("-pk").first()
        if change is not None:
            try:
                apply_change(change.pk, worker_id=worker)
            except TRANSIENT:
                pass  # no master reported yet, or a worker holds it: again
        time.sleep(0.5)
    return False
