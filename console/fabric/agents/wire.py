"""What crosses between the console and an agent, as JSON: the push's options and result, the
isolation audit's plan and answers. Desired state travels as the canonical JSON the console
stores on a change (:meth:`DesiredFabric.from_json` reads it on the agent's side)."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from console.fabric.drivers.base import PortStateResult
from console.fabric.opensm.isolation_audit import AuditPlan, ProbeResult
from console.fabric.opensm.lint import LintProblem
from console.fabric.opensm.partitions_file import OperatorPartition
from console.fabric.opensm.push_types import PushOptions, PushResult, PushStep, SmKeys

#: SMInfo states of a subnet manager that runs (the agent's heartbeat reports one of these, or
#: "NO ANSWER" when its OpenSM does not answer).
SM_UP = frozenset({"MASTER", "STANDBY", "DISCOVERING", "NOTACTIVE"})
#: The ``code`` of an agent's error that says its OpenSM does not answer: the caller waits.
SM_DOWN = "sm_down"


def options_to_json(options: PushOptions) -> dict[str, Any]:
    """PushOptions as JSON (the keys included: the agent writes them into opensm.conf)."""
    out = {f.name: getattr(options, f.name) for f in fields(options) if f.name != "keys"}
    out["non_members"] = list(options.non_members)
    if options.keys is not None:
        out["keys"] = {
            "m_key": f"{options.keys.m_key:#x}",
            "sm_key": f"{options.keys.sm_key:#x}",
            "sa_key": f"{options.keys.sa_key:#x}",
            "protection_level": options.keys.protection_level,
            "lease_period": options.keys.lease_period,
        }
    return out


def options_from_json(data: dict[str, Any]) -> PushOptions:
    known = {f.name for f in fields(PushOptions)}
    values = {k: v for k, v in data.items() if k in known and k != "keys"}
    values["non_members"] = tuple(int(g) for g in data.get("non_members", ()))
    keys = data.get("keys")
    if keys:
        values["keys"] = SmKeys(
            m_key=int(keys["m_key"], 16),
            sm_key=int(keys["sm_key"], 16),
            sa_key=int(keys["sa_key"], 16),
            protection_level=int(keys["protection_level"]),
            lease_period=int(keys["lease_period"]),
        )
    return PushOptions(**values)


def result_to_json(result: PushResult) -> dict[str, Any]:
    return {
        "outcome": result.outcome,
        "steps": [
            {
                "name": s.name,
                "status": s.status,
                "log": s.log,
                "duration_s": s.duration_s,
                "restarted_opensm": s.restarted_opensm,
                "pkey_indexes": {str(k): {str(g): i for g, i in v.items()} for k, v in s.pkey_indexes.items()},
                "absent": {str(k): v for k, v in s.absent.items()},
            }
            for s in result.steps
        ],
        "problems": [asdict(p) for p in result.problems],
        "mismatches": list(result.mismatches),
        "duration_s": result.duration_s,
        "kept": [asdict(k) for k in result.kept],
        "written": result.written,
    }


def result_from_json(data: dict[str, Any]) -> PushResult:
    steps = [
        PushStep(
            s["name"],
            status=s["status"],
            log=list(s["log"]),
            duration_s=float(s["duration_s"]),
            restarted_opensm=bool(s["restarted_opensm"]),
            pkey_indexes={int(k): {int(g): int(i) for g, i in v.items()} for k, v in s["pkey_indexes"].items()},
            absent={int(k): [int(g) for g in v] for k, v in s["absent"].items()},
        )
        for s in data["steps"]
    ]
    return PushResult(
        data["outcome"],
        steps,
        problems=[LintProblem(**p) for p in data["problems"]],
        mismatches=list(data["mismatches"]),
        duration_s=float(data["duration_s"]),
        kept=[OperatorPartition(**k) for k in data["kept"]],
        written=data.get("written"),
    )


def plan_to_json(plan: AuditPlan) -> dict[str, Any]:
    return {"pairs": [list(p) for p in plan.pairs], "ports": list(plan.ports)}


def plan_from_json(data: dict[str, Any]) -> AuditPlan:
    return AuditPlan(tuple((int(a), int(b)) for a, b in data["pairs"]), tuple(int(g) for g in data["ports"]))


def probe_to_json(probe: ProbeResult) -> dict[str, Any]:
    return {
        "paths": [[a, b, pkey] for (a, b), pkey in probe.paths.items()],
        "tables": {str(g): {str(k): m for k, m in t.items()} for g, t in probe.tables.items()},
        "missing": list(probe.missing),
        "sm_guid": probe.sm_guid,
    }


def probe_from_json(data: dict[str, Any]) -> ProbeResult:
    return ProbeResult(
        paths={(int(a), int(b)): (int(p) if p is not None else None) for a, b, p in data["paths"]},
        tables={int(g): {int(k): m for k, m in t.items()} for g, t in data["tables"].items()},
        missing=[int(g) for g in data["missing"]],
        sm_guid=data.get("sm_guid"),
    )


def port_state_to_json(result: PortStateResult) -> dict[str, Any]:
    return asdict(result)


def port_state_from_json(data: dict[str, Any]) -> PortStateResult:
    return PortStateResult(**data)
