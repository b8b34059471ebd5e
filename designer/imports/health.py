"""Fabric validation on what the wire reports (issue 35's suite, first part): each test a verdict
with the offending objects and the fix, over one ibnetdiscover run and the subnet managers' states.

- ``guids``: no two nodes share a node GUID, no two ports a port GUID (OpenSM keys its whole
  database by them: a duplicate makes one of the two unreachable, or both flap);
- ``lids``: every linked CA port and every switch has a LID, none is 0, none is shared (LMC
  ranges counted);
- ``link-rates``: no link trained below what its ends run elsewhere (narrower, or SDR beside
  faster ports: a failed training);
- ``subnet-managers``: exactly one master SM.

Plain typed Python over :class:`designer.imports.model.Discovery`; what gathers the inputs (the
agents, the latest discovery) and stores a run lives in the console.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from designer.imports.infer import degraded_links
from designer.imports.model import Discovery, IbNode

MAX_OFFENDERS = 50


@dataclass
class Verdict:
    """One test's outcome: ``ok``, what it found (at most :data:`MAX_OFFENDERS` named, ``count`` all)."""

    code: str
    title: str
    fix: str
    offenders: list[str] = field(default_factory=list)
    count: int = 0
    skipped: str = ""  # why the test could not run (its inputs could not be read): no verdict

    @classmethod
    def skip(cls, code: str, title: str, why: str) -> Verdict:
        return cls(code, title, "", skipped=why)

    @property
    def ok(self) -> bool:
        return self.count == 0

    def add(self, offender: str) -> None:
        self.count += 1
        if len(self.offenders) < MAX_OFFENDERS:
            self.offenders.append(offender)

    @property
    def status(self) -> str:
        return "skip" if self.skipped else "pass" if self.ok else "fail"

    def as_dict(self) -> dict[str, Any]:
        out = {
            "code": self.code,
            "title": self.title,
            "status": self.status,
            "count": self.count,
            "offenders": list(self.offenders),
            "fix": "" if self.ok else self.fix,
        }
        if self.skipped:
            out["why"] = self.skipped
        return out


def label(node: IbNode) -> str:
    """How a verdict names a node: its description and its id."""
    return f"{node.desc or node.node_id} ({node.node_id})"


def guids(disc: Discovery) -> Verdict:
    out = Verdict(
        "guids",
        "Node and port GUIDs are unique",
        "Reprogram the duplicate's GUIDs (a cloned HCA or a replaced switch's VPD): OpenSM keys every "
        "node and port by them",
    )
    nodes: dict[int, list[IbNode]] = defaultdict(list)
    ports: dict[int, list[str]] = defaultdict(list)
    for node in disc.nodes:
        if node.guid is not None:
            nodes[node.guid].append(node)
        if node.kind == "Switch" and node.port_guid is not None:
            ports[node.port_guid].append(f"{label(node)} port 0")
        elif node.kind != "Switch":
            for p in node.ports:
                if p.port_guid is not None:
                    ports[p.port_guid].append(f"{label(node)} port {p.port}")
    for guid, same in sorted(nodes.items()):
        if len({n.node_id for n in same}) > 1:
            out.add(f"node GUID {guid:#018x}: " + ", ".join(label(n) for n in same))
    for guid, where in sorted(ports.items()):
        if len(set(where)) > 1:
            out.add(f"port GUID {guid:#018x}: " + ", ".join(sorted(set(where))))
    return out


def lids(disc: Discovery) -> Verdict:
    out = Verdict(
        "lids",
        "Every port has a LID of its own",
        "Let the SM sweep again (a port with no LID is not in its database: its link or its SMA is "
        "down); a LID shared by two ports means two SMs assigned them: keep one master",
    )
    owners: dict[int, list[str]] = defaultdict(list)
    for node in disc.nodes:
        if node.kind == "Switch":
            if not node.lid:
                out.add(f"switch {label(node)} has no LID")
                continue
            span = range(node.lid, node.lid + (1 << (node.lmc or 0)))
            for lid in span:
                owners[lid].append(label(node))
            continue
        for p in node.ports:
            if not p.lid:
                out.add(f"{label(node)} port {p.port} has no LID")
                continue
            for lid in range(p.lid, p.lid + (1 << (p.lmc or 0))):
                owners[lid].append(f"{label(node)} port {p.port}")
    for lid, where in sorted(owners.items()):
        if len(where) > 1:
            out.add(f"LID {lid}: " + ", ".join(where))
    return out


def link_rates(disc: Discovery) -> Verdict:
    out = Verdict(
        "link-rates",
        "No link runs below what its ends support",
        "Reseat or replace the cable (or the transceivers) and check the port's settings: a link that "
        "trained narrower or at SDR carries a fraction of its traffic",
    )
    for where, rate, _line in degraded_links(disc, label):
        out.add(f"{where} runs at {rate}")
    return out


def subnet_managers(states: Mapping[str, str]) -> Verdict:
    """``states``: SM host → the state its SM reports (MASTER, STANDBY, DISCOVERING, NOTACTIVE…)."""
    out = Verdict(
        "subnet-managers",
        "Exactly one master subnet manager",
        "No master: start OpenSM (or its standby takes over); two masters: the subnet is split or "
        "an SM runs with the wrong priority: stop the one the console does not manage",
    )
    masters = sorted(host for host, state in states.items() if state.upper() == "MASTER")
    if not masters:
        out.add(
            "no subnet manager is MASTER ("
            + (", ".join(f"{h}: {s}" for h, s in sorted(states.items())) or "none answered")
            + ")"
        )
    elif len(masters) > 1:
        out.add("several masters: " + ", ".join(masters))
    return out


CHECKS: tuple[Callable[[Discovery], Verdict], ...] = (guids, lids, link_rates)


def validate(disc: Discovery, sm_states: Mapping[str, str] | None) -> list[Verdict]:
    """Every test over one discovery (and the SMs' states, when they could be asked)."""
    verdicts = [check(disc) for check in CHECKS]
    if sm_states is not None:
        verdicts.append(subnet_managers(sm_states))
    return verdicts


def as_csv(verdicts: Iterable[Mapping[str, Any]]) -> str:
    """The report (:meth:`Verdict.as_dict` rows) as CSV: one row per offender, a passing test one
    row with none."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["code", "status", "offender", "fix"])
    for v in verdicts:
        for offender in v["offenders"] or [""]:
            writer.writerow([v["code"], v["status"], offender, v["fix"]])
    return buf.getvalue()
