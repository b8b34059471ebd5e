"""What a discovered fabric is: tiers, rails, scalable units, oversubscription, imbalance, link rates.

Tiers count switch hops from the host-facing switches (leaf = a switch with at least one host CA;
Aggregation Nodes are not hosts), so 2- and 3-level trees and directors (line ASICs below spine
ASICs) rank truly. Rails show when every leaf serves one HCA index of multi-HCA hosts; scalable
units are then the groups of leaves that serve the same hosts. Imbalance and degraded links are
findings with counts, not errors. Pure: discovery and compare call it on the same records.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from designer.catalogue import generation_rank
from designer.imports.model import Discovery, Finding, IbNode, IbPort

TIER_NAMES = ("leaf", "spine", "core")
_HOST_HCA = re.compile(r"^(\S+)\s+(\S+)$")
_HCA_NUM = re.compile(r"(\d+)$")


def tier_name(rank: int) -> str:
    """leaf, spine, core, then tier3, tier4…"""
    return TIER_NAMES[rank] if rank < len(TIER_NAMES) else f"tier{rank}"


def plural(tier: str, n: int = 2) -> str:
    """leaf → leaves, spine → spines."""
    if n == 1:
        return tier
    return "leaves" if tier == "leaf" else f"{tier}s"


def host_and_hca(node: IbNode, shared: set[str]) -> tuple[str, str]:
    """(host, HCA name) from a CA's description; a vendor default shared by many CAs names none."""
    m = _HOST_HCA.match(node.desc)
    if m:
        return m.group(1), m.group(2)
    if node.desc and (" " not in node.desc.strip() or node.desc not in shared):
        return node.desc, ""
    return node.node_id, ""


def shared_descriptions(cas: list[IbNode]) -> set[str]:
    """Descriptions more than one CA carries (vendor defaults such as "MT4129 ConnectX7 …")."""
    counts = Counter(n.desc for n in cas)
    return {d for d, n in counts.items() if n > 1}


def hca_index(hca: str) -> int | None:
    """The HCA's number (mlx5_5 → 5, HCA-2 → 2), None without one."""
    m = _HCA_NUM.search(hca)
    return int(m.group(1)) if m else None


@dataclass
class Inference:
    """The inferred structure, keyed by ibnetdiscover node id."""

    rank: dict[str, int] = field(default_factory=dict)  # switch node id → 0 leaf, 1 spine…
    rails: dict[str, int] = field(default_factory=dict)  # leaf node id → HCA index it serves
    su: dict[str, int] = field(default_factory=dict)  # leaf node id → scalable unit
    sharp: set[str] = field(default_factory=set)  # switch node ids with an Aggregation Node
    oversubscription: dict[str, str] = field(default_factory=dict)  # tier → "down:up"
    rates: Counter[str] = field(default_factory=Counter)  # "4xNDR" → links
    degraded: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def levels(self) -> int:
        return max(self.rank.values()) + 1 if self.rank else 0

    def tier(self, node_id: str) -> str:
        return tier_name(self.rank.get(node_id, 0))

    def as_dict(self) -> dict[str, Any]:
        """The JSON the import report carries (counts; names are the graph's)."""
        tiers = Counter(self.tier(n) for n in self.rank)
        return {
            "levels": self.levels,
            "tiers": dict(sorted(tiers.items(), key=lambda kv: TIER_NAMES.index(kv[0]) if kv[0] in TIER_NAMES else 9)),
            "rails": len(set(self.rails.values())) if self.rails else 0,
            "scalable_units": len(set(self.su.values())),
            "sharp_switches": len(self.sharp),
            "oversubscription": self.oversubscription,
            "rates": dict(self.rates.most_common()),
            "mixed_speeds": len({r.split("x", 1)[-1] for r in self.rates}) > 1,
            "degraded_links": len(self.degraded),
        }


def infer(disc: Discovery, names: dict[str, str] | None = None) -> Inference:
    """Infer tiers, rails, SUs, oversubscription, imbalance and rates of one discovery."""
    names = names or {}

    shared = shared_descriptions(disc.cas)

    def label(node: IbNode) -> str:
        if node.kind == "Ca" and node.node_id not in names:
            return " ".join(p for p in host_and_hca(node, shared) if p)
        return names.get(node.node_id) or node.desc or node.node_id

    out = Inference()
    by_id = disc.by_id()
    switch_ids = {n.node_id for n in disc.switches}
    adjacency: dict[str, Counter[str]] = defaultdict(Counter)
    hosts_on: dict[str, list[IbNode]] = defaultdict(list)
    gbps: dict[tuple[str, str], float] = defaultdict(float)  # (switch, peer or "hosts") → Gb/s
    for node, port, peer, peer_port in disc.links():
        worst = reported(port, peer, peer_port)
        if worst is not None and not (node.aggregation_node or peer.aggregation_node):
            out.rates[worst.rate] += 1
        for a, b in ((node, peer), (peer, node)):
            if a.node_id not in switch_ids:
                continue
            if b.aggregation_node:
                out.sharp.add(a.node_id)
            elif b.node_id in switch_ids:
                adjacency[a.node_id][b.node_id] += 1
                gbps[(a.node_id, b.node_id)] += port.rate_gbps or 0
            elif b.kind == "Ca":
                hosts_on[a.node_id].append(b)
                gbps[(a.node_id, "hosts")] += port.rate_gbps or 0
    queue = deque(sorted(hosts_on))
    out.rank = dict.fromkeys(queue, 0)
    while queue:
        cur = queue.popleft()
        for nxt in sorted(adjacency[cur]):
            if nxt not in out.rank:
                out.rank[nxt] = out.rank[cur] + 1
                queue.append(nxt)
    for sid in switch_ids:
        out.rank.setdefault(sid, 0)
    _rails_and_units(out, hosts_on, shared, {k: label(v) for k, v in by_id.items()})
    _oversubscription(out, gbps)
    _imbalance(out, adjacency, by_id, label)
    _degraded(out, disc, label)
    return out


def reported(port: IbPort, peer: IbNode, peer_port: int) -> IbPort | None:
    """The worse of the two ends' reports of one link (ibnetdiscover prints each link from both
    sides, and a port that trained down shows it on its own line); None when neither has a rate."""
    back = next((q for q in peer.ports if q.port == peer_port), None)
    reports = [p for p in (port, back) if p is not None and p.width and p.speed]
    if not reports:
        return None
    return min(reports, key=lambda p: (p.width or 0, generation_rank(p.speed or "")))


def _rails_and_units(
    out: Inference, hosts_on: dict[str, list[IbNode]], shared: set[str], labels: dict[str, str]
) -> None:
    hcas_of: dict[str, set[str]] = defaultdict(set)
    index_of: dict[str, Counter[int]] = {}
    hosts_of: dict[str, set[str]] = {}
    for leaf, cas in hosts_on.items():
        pairs = [host_and_hca(ca, shared) for ca in cas]
        # Unnamed HCAs (vendor default descriptions) say nothing about rails.
        index_of[leaf] = Counter(i for i in (hca_index(hca) for _, hca in pairs) if i is not None)
        hosts_of[leaf] = {host for host, _ in pairs}
        for ca, (host, _) in zip(cas, pairs, strict=True):
            hcas_of[host].add(ca.node_id)
    multi = bool(hcas_of) and max(len(v) for v in hcas_of.values()) > 1
    if not multi:
        return
    rails: dict[str, int] = {}
    for leaf, counts in index_of.items():
        if not counts:
            continue
        index, n = counts.most_common(1)[0]
        if n * 2 <= sum(counts.values()):
            return  # no HCA index dominates this leaf: not rail-optimised
        rails[leaf] = index
        if len(counts) > 1:
            out.findings.append(
                Finding(
                    "rail-mixed",
                    labels[leaf],
                    f"leaf {labels[leaf]} serves rail {index} ({n} HCAs) and "
                    + ", ".join(f"HCA index {i} ({c})" for i, c in sorted(counts.items()) if i != index),
                )
            )
    if len(set(rails.values())) < 2:
        return
    out.rails = rails
    # Scalable units: leaves joined by the hosts they share.
    parent = {leaf: leaf for leaf in hosts_of}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    first_leaf: dict[str, str] = {}
    for leaf in sorted(hosts_of):
        for host in hosts_of[leaf]:
            other = first_leaf.setdefault(host, leaf)
            parent[root(leaf)] = root(other)
    roots = sorted({root(leaf) for leaf in hosts_of})
    number = {r: i for i, r in enumerate(roots)}
    out.su = {leaf: number[root(leaf)] for leaf in hosts_of}


def _oversubscription(out: Inference, gbps: dict[tuple[str, str], float]) -> None:
    down: dict[int, float] = defaultdict(float)
    up: dict[int, float] = defaultdict(float)
    for (sw, other), value in gbps.items():
        r = out.rank.get(sw, 0)
        if other == "hosts" or out.rank.get(other, 0) < r:
            down[r] += value
        elif out.rank.get(other, 0) > r:
            up[r] += value
    for r in sorted(down):
        if up[r]:
            ratio = down[r] / up[r]
            out.oversubscription[tier_name(r)] = f"{ratio:.3g}:1"


def _imbalance(
    out: Inference, adjacency: dict[str, Counter[str]], by_id: dict[str, IbNode], label: Callable[[IbNode], str]
) -> None:
    uplinks: dict[int, dict[str, Counter[str]]] = defaultdict(dict)
    for sw, peers in adjacency.items():
        r = out.rank.get(sw, 0)
        uplinks[r][sw] = Counter({p: n for p, n in peers.items() if out.rank.get(p, 0) == r + 1})
    for r, table in sorted(uplinks.items()):
        totals = Counter(sum(c.values()) for c in table.values() if c)
        if not totals:
            continue
        usual = totals.most_common(1)[0][0]
        upper = tier_name(r + 1)
        for sw, peers in sorted(table.items()):
            if not peers:
                continue
            spread = Counter(peers.values())
            total = sum(peers.values())
            if len(spread) == 1 and total == usual:
                continue
            parts = ", ".join(
                f"{n} link{'s' if n > 1 else ''} to {k} {plural(upper, k)}"
                for n, k in sorted(spread.items(), reverse=True)
            )
            out.findings.append(
                Finding(
                    "imbalance",
                    label(by_id[sw]),
                    f"{tier_name(r)} {label(by_id[sw])} sends {total} uplinks ({parts}); most {plural(tier_name(r))} send {usual}",
                )
            )


def degraded_links(disc: Discovery, label: Callable[[IbNode], str]) -> list[tuple[str, str, int]]:
    """Links that trained below what their ends run elsewhere (narrower, or SDR beside faster
    ports): (where, the rate they run at, the input line)."""
    best: dict[str, tuple[int, int]] = {}
    for node in disc.nodes:
        widths = [p.width for p in node.ports if p.width]
        speeds = [generation_rank(p.speed) for p in node.ports if p.speed]
        best[node.node_id] = (max(widths, default=0), max(speeds, default=-1))
    out = []
    for node, port, peer, peer_port in disc.links():
        worst = reported(port, peer, peer_port)
        if worst is None:
            continue
        wa, sa = best[node.node_id]
        wb, sb = best[peer.node_id]
        width = worst.width or 0
        # Narrower than both ends run elsewhere, or 1x beside wider ports (never a configured mode;
        # 2x is: split ports). SDR is what a failed training falls back to.
        narrow = width < min(wa, wb) or (width == 1 and max(wa, wb) > 1)
        slow = worst.speed == "SDR" and max(sa, sb) > generation_rank("SDR")
        if narrow or slow:
            out.append((f"{label(node)}[{port.port}] — {label(peer)}[{peer_port}]", worst.rate, worst.line))
    return out


def _degraded(out: Inference, disc: Discovery, label: Callable[[IbNode], str]) -> None:
    """A link that trained below what its ends run elsewhere (narrower, or SDR beside faster ports)."""
    for where, rate, line in degraded_links(disc, label):
        out.degraded.append(where)
        out.findings.append(
            Finding(
                "degraded-link",
                where,
                f"{where} runs at {rate}: its ends run faster elsewhere (down-trained link)",
                line,
            )
        )
