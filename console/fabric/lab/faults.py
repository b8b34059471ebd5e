"""Faults injected into a lab fabric: pull and put back cables, set port counters.

Operators and tests name ports the way the design does (``su01-leaf-r1`` 33, ``su01-n01`` 3 =
its HCA-3); :func:`resolve_port` maps them to ibsim's node ids. Every fault is audited when an
actor is given.

ibsim answers a console command whether or not it acted (``# port 7 ... is not linked``, ``# no
previous link stored`` are no-ops it reports like successes), so a cable fault is read back over
SMPs: PortInfo of the port before and after, from a diag client attached to the port's own node
(a directed route of length 0: no forwarding table is involved, so the read works while OpenSM
re-routes around the change). A fault whose port did not change as asked fails loudly.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db import transaction

from console.fabric.diags.parsers import PortInfo, parse_portinfo
from console.fabric.diags.runner import DiagError
from console.fabric.lab.fabrics import lab_for
from console.fabric.lab.manager import Lab
from console.fabric.lab.spec import LabError
from console.fabric.models import Fabric
from console.tenancy import audit
from console.tenancy.context import Actor
from designer.models import DesignRevision
from designer.services import revision_graph

#: Data counters live in both PortCounters (32 bit, perfquery) and PortCountersExtended
#: (64 bit, perfquery -x); the lab sets both so every reader agrees.
DATA_COUNTERS = frozenset({"PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"})
_COUNTER_GROUPS = ("PortCounters", "PortCountersExtended")


@lru_cache(maxsize=16)
def _port_index(revision_pk: int, created_at: float) -> dict[tuple[str, int], tuple[str, int]]:
    """(design device, design port) → (ibsim node id, its port). Revisions are immutable."""
    graph = revision_graph(DesignRevision.objects.get(pk=revision_pk))
    index: dict[tuple[str, int], tuple[str, int]] = {}
    for sw in graph.switches.values():
        for port in range(1, graph.port_count(sw.name) + 1):
            index[(sw.name, port)] = (f"S-{sw.guid:016x}", port)
    for node in graph.nodes.values():
        ports = node.ca_ports or (1,) * node.hcas
        for i, ca in enumerate(node.ca_guids):
            index[(node.name, i + 1)] = (f"H-{ca:016x}", ports[i])
    return index


def resolve_port(fabric: Fabric, node: str, port: int) -> tuple[str, int]:
    """Map a design name and port (``su01-leaf-r1`` 33, ``su01-n01`` 3 = its HCA-3) to the
    ibsim node id and port; anything else (a node id, an ibsim description) passes through."""
    revision = fabric.revision
    found = _port_index(revision.pk, revision.created_at.timestamp()).get((node, port))
    return found if found is not None else (node, port)


def audit_fault(fabric: Fabric, actor: Actor | None, action: str, detail: dict[str, Any]) -> None:
    if actor is not None:
        with transaction.atomic():
            audit.record(actor, action, fabric, after=detail)


#: How long the port gets to show the change (ibsim acts before it answers: this is slack).
READBACK_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class CableFault:
    """A cable pulled or put back, with the port's state read over SMPs before and after."""

    node: str
    port: int
    op: str
    reply: str
    before: PortInfo
    after: PortInfo

    def as_dict(self) -> dict[str, object]:
        return {
            "node": self.node,
            "port": self.port,
            "op": self.op,
            "before": _state(self.before),
            "after": _state(self.after),
            "ibsim": self.reply,
        }


def _state(info: PortInfo) -> str:
    return f"{info.link_state}/{info.phys_state}"


def _linked(info: PortInfo) -> bool:
    """A cable is in: the physical link is up (logically Init, Armed or Active)."""
    return info.phys_state == "LinkUp" and not info.is_down


def read_port(lab: Lab, node_id: str, port: int) -> PortInfo:
    """PortInfo of ``node_id[port]`` over an SMP sent by a client on that very node."""
    runner = lab.diags(host=node_id)
    try:
        return parse_portinfo(runner.run("smpquery", "-D", "portinfo", "0", str(port)).stdout)
    except DiagError as exc:
        raise LabError(f"cannot read {node_id}[{port}] back over SMP: {exc}") from exc


def _cable(fabric: Fabric, node: str, port: int, *, plug_in: bool, actor: Actor | None) -> CableFault:
    op = "replug" if plug_in else "unplug"
    lab = lab_for(fabric)
    sim_node, sim_port = resolve_port(fabric, node, port)
    node_id = lab.node_id(sim_node)
    where = f"{node}[{port}]" + (f" (ibsim {node_id}[{sim_port}])" if (node, port) != (node_id, sim_port) else "")
    before = read_port(lab, node_id, sim_port)
    reply = lab.replug(node_id, sim_port) if plug_in else lab.unplug(node_id, sim_port)
    deadline = time.monotonic() + READBACK_TIMEOUT_S
    after = read_port(lab, node_id, sim_port)
    while _linked(after) != plug_in and time.monotonic() < deadline:
        time.sleep(0.05)
        after = read_port(lab, node_id, sim_port)
    said = f"ibsim said {reply!r}" if reply else "ibsim said nothing"
    if _linked(after) != plug_in:
        raise LabError(f"{op} {where} did not take: the port reads {_state(after)} over SMP ({said})")
    if _linked(before) == plug_in:
        state = "in" if plug_in else "out"
        raise LabError(
            f"{op} {where}: ibsim did not act, the cable was already {state} "
            f"(the port read {_state(before)} over SMP before; {said})"
        )
    audit_fault(fabric, actor, f"fabric.lab.{op}", {"node": node, "port": port, "after": _state(after)})
    return CableFault(node, port, op, reply, before, after)


def unplug(fabric: Fabric, node: str, port: int, *, actor: Actor | None = None) -> CableFault:
    """Pull the cable at ``node`` ``port`` in the fabric's lab (ibsim ``Unlink``), read back:
    :class:`LabError` unless the port went from linked to down."""
    return _cable(fabric, node, port, plug_in=False, actor=actor)


def replug(fabric: Fabric, node: str, port: int, *, actor: Actor | None = None) -> CableFault:
    """Put back a cable pulled with :func:`unplug` (ibsim ``ReLink``), read back:
    :class:`LabError` unless the port went from down to linked."""
    return _cable(fabric, node, port, plug_in=True, actor=actor)


def parse_counter_assignments(items: list[str]) -> dict[str, int]:
    """``["SymbolErrorCounter=50", "PortCountersExtended.PortXmitData=1e6"]`` → dict; values
    are integers (decimal or 0x hex). Raises ValueError naming the bad item."""
    out: dict[str, int] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        group, dot, name = key.rpartition(".")
        if not sep or not name.isidentifier() or (dot and group not in _COUNTER_GROUPS):
            raise ValueError(f"expected COUNTER=VALUE (e.g. SymbolErrorCounter=50), got {item!r}")
        try:
            number = int(value.strip(), 0)
        except ValueError:
            raise ValueError(f"{key}: {value!r} is not an integer") from None
        if number < 0:
            raise ValueError(f"{key}: counters cannot be negative")
        out[key] = number
    if not out:
        raise ValueError("give at least one COUNTER=VALUE")
    return out


def set_counters(
    fabric: Fabric, node: str, port: int, counters: Mapping[str, int], *, actor: Actor | None = None
) -> list[str]:
    """Set port counters through ibsim ``PerformanceSet``: error counters (``SymbolErrorCounter``)
    and data counters (``PortXmitData`` sets both the 32-bit and the extended 64-bit counter;
    ``PortCountersExtended.X`` sets only the extended one)."""
    lab = lab_for(fabric)
    node_id, sim_port = resolve_port(fabric, node, port)
    node_id = lab.node_id(node_id)  # ibsim's console knows node ids only
    replies: list[str] = []
    for key, value in sorted(counters.items()):
        group, _, name = key.rpartition(".")
        groups = [group] if group else ["PortCounters"]
        if not group and name in DATA_COUNTERS:
            groups.append("PortCountersExtended")
        for grp in groups:
            width_max = 0xFFFFFFFF if grp == "PortCounters" and name in DATA_COUNTERS else None
            shown = min(value, width_max) if width_max else value
            reply = lab.console(f'PerformanceSet "{node_id}"[{sim_port}] {grp}.{name}={shown}')
            if "has been set to" not in reply:
                raise LabError(f"ibsim refused {grp}.{name} on {node}[{port}]: {reply}")
            replies.append(reply)
    audit_fault(fabric, actor, "fabric.lab.counters", {"node": node, "port": port, **counters})
    return replies
