"""Pure choice functions: given free nodes per leaf group, which groups and nodes to take.

Kept apart from the engine so the packing rules can be read, and tested, on plain lists.

Topology-aware best fit, in order of preference:

1. the lowest common switch that can hold the gang: one leaf group, else one pod, else the fabric;
2. at that level the fewest leaf groups;
3. among equally few groups, the fullest ones (least free capacity left in the groups touched), so
   wholly free groups stay whole for the next large job;
4. a one-node job placed now first takes a backfill hole (a node free now whose next booking
   starts after the job ends), in any leaf group, the tightest first (:func:`hole_first_node`);
5. inside a group, rail-aligned nodes first, then the least idle time the booking would leave on
   the node around it (a future reservation takes nodes busy until just before it, so idle ones
   stay free for backfill; a job placed now fills the gap before another's reservation first),
   then by index (keeps free nodes contiguous).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .state import PoolState
from .topology import HOPS_CROSS_POD, HOPS_SAME_GROUP, HOPS_SAME_POD, PoolTopology
from .types import Placement, Policy, Window

#: Idle time a booking would leave on a node: (1 if nothing follows it on the node else 0, seconds
#: idle before it plus, when something follows, between it and that).
Slack = tuple[int, float]

#: Constraint levels: how high in the tree a gang may spread.
LEVEL_GROUP = 0
LEVEL_POD = 1
LEVEL_FABRIC = 2


def fewest_groups(counts: Sequence[int], groups: Sequence[int], needed: int) -> list[int] | None:
    """Fewest groups among ``groups`` whose free counts reach ``needed``, fullest first.

    Greedy largest-first gives the minimum number of groups ``k``; a local search then swaps
    chosen groups for smaller unchosen ones while the total still covers ``needed``, which
    minimises the free capacity left behind in touched groups (best fit) without raising ``k``.
    """
    ranked = sorted(((counts[g], g) for g in groups if counts[g] > 0), reverse=True)
    total = 0
    k = 0
    for count, _ in ranked:
        total += count
        k += 1
        if total >= needed:
            break
    else:
        return None
    chosen = ranked[:k]
    rest = ranked[k:]
    improved = True
    while improved and rest:
        improved = False
        best: tuple[int, int, int] | None = None  # (new total, chosen index, rest index)
        for ci, (c_count, _) in enumerate(chosen):
            for ri, (r_count, _) in enumerate(rest):
                if r_count >= c_count:
                    continue
                new_total = total - c_count + r_count
                if new_total >= needed and (best is None or new_total < best[0]):
                    best = (new_total, ci, ri)
        if best is not None:
            new_total, ci, ri = best
            chosen[ci], rest[ri] = rest[ri], chosen[ci]
            total = new_total
            improved = True
    return [g for _, g in sorted(chosen)]


def choose_groups(
    counts: Sequence[int],
    pods: Sequence[Sequence[int]],
    needed: int,
    max_level: int,
) -> tuple[list[int], int] | None:
    """Groups to take ``needed`` nodes from, and the level used; ``None`` when nothing fits.

    The returned groups are ordered fullest first; callers fill them in that order so the
    remainder is left in the emptiest group, the block most worth keeping.
    """
    best_single: tuple[int, int] | None = None
    for group, count in enumerate(counts):
        if count >= needed and (best_single is None or count < best_single[0]):
            best_single = (count, group)
    if best_single is not None:
        return [best_single[1]], LEVEL_GROUP
    if max_level == LEVEL_GROUP:
        return None
    if len(pods) > 1:
        best_pod: tuple[int, int, list[int]] | None = None
        for pod_groups in pods:
            chosen = fewest_groups(counts, pod_groups, needed)
            if chosen is None:
                continue
            key = (len(chosen), sum(counts[g] for g in chosen))
            if best_pod is None or key < best_pod[:2]:
                best_pod = (key[0], key[1], chosen)
        if best_pod is not None:
            return best_pod[2], LEVEL_POD
        if max_level == LEVEL_POD:
            return None
    chosen = fewest_groups(counts, range(len(counts)), needed)
    if chosen is None:
        return None
    return chosen, (LEVEL_POD if len(pods) <= 1 else LEVEL_FABRIC)


def take_nodes(
    groups: Sequence[int],
    free_nodes_of: dict[int, list[int]],
    needed: int,
    preferred: frozenset[int],
    slack: Callable[[int], Slack] | None = None,
) -> list[int]:
    """Take ``needed`` nodes from ``groups`` in order, preferred (rail-aligned) nodes first, then
    the least ``slack`` (idle time the booking would leave around it on that node), then by index."""
    taken: list[int] = []
    for group in groups:
        if len(taken) == needed:
            break
        if slack is None or len(free_nodes_of[group]) <= needed - len(taken):
            # No choice to make (or no time fit asked): all of them, in index order.
            nodes = sorted(free_nodes_of[group], key=lambda n: (n not in preferred, n))
        else:
            nodes = sorted(free_nodes_of[group], key=lambda n: (n not in preferred, slack(n), n))
        taken.extend(nodes[: needed - len(taken)])
    return taken


def hole_first_node(window: Window, preferred: frozenset[int], slack: Callable[[int], Slack]) -> int:
    """The node a one-node job placed now takes: best fit in time over every leaf group.

    A node free now but booked later (a backfill hole before another job's reservation) that the
    job fits into ranks before any open node, the tightest hole first; only then, as for any
    gang, the fullest leaf group. Choosing the fullest group first (the rule for gangs) would
    send the job to an open node there while a hole in another group stays idle until its
    reservation starts, and the open node is then missing to the next job that needs it.
    Preferred (rail-aligned) nodes first, ties by index.
    """
    best: tuple[bool, Slack, int, int] | None = None
    for group, count in enumerate(window.counts):
        if not count:
            continue
        for node in window.free_nodes_of(group):
            key = (node not in preferred, slack(node), count, node)
            if best is None or key < best:
                best = key
    if best is None:
        raise ValueError("no free node in the window")
    return best[3]


def time_slack(state: PoolState, start: float, end: float) -> Callable[[int], Slack]:
    """Idle time a booking of ``[start, end)`` would leave on a node, as a :data:`Slack`.

    Idle since the node's previous booking ended (or now) until ``start``, plus, when the node
    has a booking after ``end``, the gap until it; a node with none is open-ended and ranks after
    every node with one. Least slack first: a future reservation takes nodes busy until just
    before it (idle ones stay free for backfill now), and a job placed now fills the gap before
    another's reservation (unreserved nodes stay free).
    """
    entries = state.entries
    now = state.now
    future = state.future
    present = start <= now

    def slack(node: int) -> Slack:
        if present and node not in future:
            return (1, 0.0)  # free now, nothing booked later: the common case, no scan
        before = now
        after = math.inf
        for s, e, _m, _bid in entries[node]:
            if before < e <= start:
                before = e
            elif end <= s < after:
                after = s
        idle = max(0.0, start - before)
        return (1, idle) if after == math.inf else (0, idle + after - end)

    return slack


def lowest_bits(mask: int, count: int) -> tuple[int, ...]:
    """Indices of the ``count`` lowest set bits of ``mask``."""
    out: list[int] = []
    index = 0
    while len(out) < count and mask:
        if mask & 1:
            out.append(index)
        mask >>= 1
        index += 1
    return tuple(out)


def first_fit_nodes(window: Window, pods: Sequence[Sequence[int]], needed: int, level: int) -> list[int] | None:
    """The first-fit baseline: first free nodes in index order, ``None`` when they do not fit.

    It knows nothing of leaves, yet still obeys spread limits by taking the first group (or pod)
    in index order that holds the gang.
    """
    if level == LEVEL_GROUP:
        for gid, count in enumerate(window.counts):
            if count >= needed:
                return window.free_nodes_of(gid)[:needed]
        return None
    if level == LEVEL_POD and len(pods) > 1:
        for pod in pods:
            if sum(window.counts[g] for g in pod) >= needed:
                nodes = [n for g in pod for n in window.free_nodes_of(g)]
                return sorted(nodes)[:needed]
        return None
    if sum(window.counts) < needed:
        return None
    taken: list[int] = []
    for gid, count in enumerate(window.counts):
        if count:
            taken.extend(window.free_nodes_of(gid)[: needed - len(taken)])
            if len(taken) == needed:
                break
    return taken


def build_placement(
    topo: PoolTopology, policy: Policy, nodes: list[int], masks: list[int], start: float, end: float, *, fill: float
) -> Placement:
    """Describe the chosen nodes and GPU masks as a :class:`Placement`: leaves, spines, hops and
    a score in (0, 1] (``fill``: the share of the touched groups' free nodes taken)."""
    groups = sorted({topo.nodes[n].leaf_group for n in nodes})
    leaves: set[int] = set()
    gpu_indices: list[tuple[int, ...]] = []
    for node, mask in zip(nodes, masks, strict=True):
        info = topo.nodes[node]
        used = lowest_bits(mask, info.gpus)
        gpu_indices.append(used)
        hcas = len(info.rail_leaves)
        # GPU i is served by HCA i on a rail-optimised node; with fewer HCAs they are shared
        # in order (GPUs 0-3 on HCA 0, 4-7 on HCA 1 for two HCAs).
        leaves.update(info.rail_leaves[i * hcas // info.gpus] for i in used)
    spines: tuple[int, ...]
    if len(groups) == 1:
        hops, spines = HOPS_SAME_GROUP, ()
    else:
        pods = {topo.groups[g].pod for g in groups}
        hops = HOPS_SAME_POD if len(pods) == 1 else HOPS_CROSS_POD
        spines = tuple(sorted(topo.spines_for_leaves(leaves)))
    aligned = all(n in topo.rail_aligned_nodes for n in nodes)
    score = (1.0 / len(groups)) * (1.0 if aligned else 0.5) * min(1.0, fill)
    return Placement(
        node_ids=tuple(nodes),
        gpu_indices=tuple(gpu_indices),
        start=start,
        end=end,
        leaf_groups=tuple(groups),
        leaves=tuple(sorted(leaves)),
        spines=spines,
        rail_aligned=aligned,
        max_hops=hops,
        score=round(score, 4),
        policy=policy,
    )
