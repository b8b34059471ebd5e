"""Pure choice functions: given free nodes per leaf group, which groups and nodes to take.

Kept apart from the engine so the packing rules can be read, and tested, on plain lists.

Topology-aware best fit, in order of preference:

1. the lowest common switch that can hold the gang: one leaf group, else one pod, else the fabric;
2. at that level the fewest leaf groups;
3. among equally few groups, the fullest ones (least free capacity left in the groups touched), so
   wholly free groups stay whole for the next large job;
4. inside a group, rail-aligned nodes first, then by index (keeps free nodes contiguous).
"""

from __future__ import annotations

from collections.abc import Sequence

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
) -> list[int]:
    """Take ``needed`` nodes from ``groups`` in order, preferred (rail-aligned) nodes first."""
    taken: list[int] = []
    for group in groups:
        if len(taken) == needed:
            break
        nodes = sorted(free_nodes_of[group], key=lambda n: (n not in preferred, n))
        taken.extend(nodes[: needed - len(taken)])
    return taken


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
