"""The lab's traffic model: ibsim moves no data, so the console makes the counters move.

Every ready reservation is a job whose nodes run a ring all-reduce on every rail: HCA *r* of node
*i* sends to HCA *r* of node *i+1*. Each flow is walked hop by hop along OpenSM's actual linear
forwarding tables (read from the switches), and its rate is added to every switch port it leaves
(``PortXmitData``) and enters (``PortRcvData``). The collector then writes the accumulated words
into ibsim with ``PerformanceSet`` before it reads, so the live view sees the traffic come back
through the counters exactly as on a real fabric. A job spread over leaves therefore lights up the
leaf–spine links its flows are routed over; a job inside one leaf (or one rail group) does not.

With the fabric's VL arbitration (:mod:`console.telemetry.arbitration`, from its QoS table) each
job's flows ride the VL its class's SL maps to, and a switch port that more traffic wants than its
line rate shares it by the arbitration tables: a saturating training job and an inference job on
the same spine link each get what arbitration gives their VL. The model shares each port on its
own (a flow throttled at one port is not reduced at the ports after it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from console.telemetry.arbitration import Arbitration, share
from console.telemetry.linkmap import DEFAULT_GBPS, LinkMap

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
    vl: int = 0  # the VL its class's SL maps to (the fabric's QoS table)


@dataclass
class PortLoad:
    """Per switch port: bits per second leaving (xmit) and entering (rcv)."""

    xmit: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))
    rcv: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))
    unrouted: int = 0
    #: per switch port, bits per second each VL wants to send, and (with arbitration) what it gets
    wanted: dict[tuple[str, int], dict[int, float]] = field(default_factory=dict)
    granted: dict[tuple[str, int], dict[int, float]] = field(default_factory=dict)

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


def route_load(
    jobs: Iterable[Job], lm: LinkMap, lfts: Mapping[str, list[int]], arbitration: Arbitration | None = None
) -> PortLoad:
    """Walk every flow of every job along the forwarding tables and sum rates per port; with
    ``arbitration``, share every oversubscribed port between the VLs (see module doc)."""
    load = PortLoad()
    for job in jobs:
        for src, sport, dst, dport in ring_flows(job, lm):
            dlids = lm.node_lids.get(dst) or []
            dlid = dlids[dport - 1] if len(dlids) >= dport else 0
            leaf, leaf_port = lm.node_uplinks[src][sport]
            end = lm.ends.get(f"{leaf}/{leaf_port}")
            gbps = job.gbps or DEFAULT_LOAD * (end.gbps if end else 400.0)
            bps = gbps * 1e9
            if not dlid or not _walk(load, lm, lfts, leaf, leaf_port, dlid, dst, bps, job.vl):
                load.unrouted += 1
    if arbitration is not None:
        _arbitrate(load, lm, arbitration)
    return load


def port_gbps(lm: LinkMap, switch: str, port: int) -> float:
    """Line rate of the link at ``switch[port]`` (measured at either end)."""
    end = lm.ends.get(f"{switch}/{port}")
    if end is None:
        peer = lm.ports.get(switch, {}).get(port)
        end = lm.ends.get(f"{peer[0]}/{peer[1]}") if peer else None
    return end.gbps if end else DEFAULT_GBPS


def _arbitrate(load: PortLoad, lm: LinkMap, arbitration: Arbitration) -> None:
    """Each switch port sends what arbitration grants its VLs; its peer receives that much."""
    for key, wanted in load.wanted.items():
        granted = share(wanted, port_gbps(lm, *key) * 1e9, arbitration)
        load.granted[key] = granted
        cut = sum(wanted.values()) - sum(granted.values())
        if cut <= 0:
            continue
        load.xmit[key] -= cut
        peer = lm.ports.get(key[0], {}).get(key[1])
        if peer is not None and peer in load.rcv:
            load.rcv[peer] -= cut


def _walk(
    load: PortLoad,
    lm: LinkMap,
    lfts: Mapping[str, list[int]],
    switch: str,
    in_port: int,
    dlid: int,
    dst: str,
    bps: float,
    vl: int = 0,
) -> bool:
    load.rcv[(switch, in_port)] += bps
    for _ in range(MAX_HOPS):
        table = lfts.get(switch)
        if table is None or dlid >= len(table) or not table[dlid]:
            return False
        out = table[dlid]
        load.xmit[(switch, out)] += bps
        by_vl = load.wanted.setdefault((switch, out), {})
        by_vl[vl] = by_vl.get(vl, 0.0) + bps
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
