"""The lab's traffic model: ibsim moves no data, so the console makes the counters move.

Every ready reservation is a job whose nodes run a ring all-reduce on every rail: HCA *r* of node
*i* sends to HCA *r* of node *i+1*. Each flow is walked hop by hop along OpenSM's actual linear
forwarding tables (read from the switches), and its rate is added to every switch port it leaves
(``PortXmitData``) and enters (``PortRcvData``). The collector then writes the accumulated words
into ibsim with ``PerformanceSet`` before it reads, so the live view sees the traffic come back
through the counters exactly as on a real fabric. A job spread over leaves therefore lights up the
leaf–spine links its flows are routed over; a job inside one leaf (or one rail group) does not.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from console.telemetry.linkmap import LinkMap

MAX_HOPS = 16
#: A ring all-reduce keeps its links busy: each flow runs at this fraction of line rate.
DEFAULT_LOAD = 0.8


@dataclass(frozen=True)
class Job:
    """Traffic of one reservation: its nodes in ring order and the rate of each flow (Gb/s)."""

    name: str
    nodes: tuple[str, ...]
    gbps: float = 0.0  # 0: DEFAULT_LOAD × the host link's line rate
    rails: tuple[int, ...] = ()  # node ports to use; () = every HCA


@dataclass
class PortLoad:
    """Per switch port: bits per second leaving (xmit) and entering (rcv)."""

    xmit: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))
    rcv: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))
    unrouted: int = 0

    def ports(self) -> set[tuple[str, int]]:
        return set(self.xmit) | set(self.rcv)


def ring_flows(job: Job, lm: LinkMap) -> list[tuple[str, int, str, int]]:
    """(src node, src node port, dst node, dst node port) of a ring all-reduce per rail."""
    nodes = [n for n in job.nodes if n in lm.node_uplinks]
    if len(nodes) < 2:
        return []
    flows = []
    for i, src in enumerate(nodes):
        dst = nodes[(i + 1) % len(nodes)]
        rails = job.rails or tuple(sorted(lm.node_uplinks[src]))
        for r in rails:
            if r in lm.node_uplinks[src] and r in lm.node_uplinks[dst]:
                flows.append((src, r, dst, r))
    return flows


def route_load(jobs: Iterable[Job], lm: LinkMap, lfts: Mapping[str, list[int]]) -> PortLoad:
    """Walk every flow of every job along the forwarding tables and sum rates per port."""
    load = PortLoad()
    for job in jobs:
        for src, sport, dst, dport in ring_flows(job, lm):
            dlids = lm.node_lids.get(dst) or []
            dlid = dlids[dport - 1] if len(dlids) >= dport else 0
            leaf, leaf_port = lm.node_uplinks[src][sport]
            end = lm.ends.get(f"{leaf}/{leaf_port}")
            gbps = job.gbps or DEFAULT_LOAD * (end.gbps if end else 400.0)
            bps = gbps * 1e9
            if not dlid or not _walk(load, lm, lfts, leaf, leaf_port, dlid, dst, bps):
                load.unrouted += 1
    return load


def _walk(
    load: PortLoad,
    lm: LinkMap,
    lfts: Mapping[str, list[int]],
    switch: str,
    in_port: int,
    dlid: int,
    dst: str,
    bps: float,
) -> bool:
    load.rcv[(switch, in_port)] += bps
    for _ in range(MAX_HOPS):
        table = lfts.get(switch)
        if table is None or dlid >= len(table) or not table[dlid]:
            return False
        out = table[dlid]
        load.xmit[(switch, out)] += bps
        peer = lm.ports.get(switch, {}).get(out)
        if peer is None:
            return False
        device, port = peer
        if device not in lm.tiers:  # a node: arrived (or misrouted to another node)
            return device == dst
        load.rcv[(device, port)] += bps
        switch = device
    return False


def words(bps: float, seconds: float) -> int:
    """4-octet words a port moves at ``bps`` over ``seconds``."""
    return int(bps * seconds / 32)
