"""Fat-tree arithmetic: leaf split, the ftree symmetry rule, 2 and 3 levels.

OpenSM's ftree wants every leaf to send the same number of links to every spine (and every
spine the same to every core of its group). So a spine count must divide the leaf's uplink
count; we take the fewest that divides it *and* offers enough ports. "Uplinks / radix rounded
up" is wrong whenever it does not divide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from designer.errors import PlanError


def divisors(n: int) -> list[int]:
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def fewest_dividing(needed_ports: int, ports_each: int, must_divide: int) -> int | None:
    """Fewest switches s with s | must_divide and s × ports_each ≥ needed_ports."""
    for s in divisors(must_divide):
        if s * ports_each >= needed_ports:
            return s
    return None


def leaf_split(ports: int, down: int, up: int) -> tuple[int, int]:
    """Most host ports a leaf can give at down:up, and the uplinks that takes."""
    m = ports // (down + up)
    return m * down, m * up


def uplinks_for(hosts: int, down: int, up: int) -> int:
    return -(-hosts * up // down)


@dataclass(frozen=True)
class TreeShape:
    """Switch and link counts of a (possibly single-switch) fat tree."""

    levels: int
    leaves: int
    hosts_per_leaf: int  # host ports planned per leaf
    leaf_up: int  # uplinks per leaf
    spines: int = 0
    pods: int = 1
    leaves_per_pod: int = 0
    spines_per_pod: int = 0
    leaf_spine_links: int = 0  # links per (leaf, spine) pair
    spine_up: int = 0  # uplinks per spine (3 levels)
    cores_per_group: int = 0
    cores: int = 0
    spine_core_links: int = 0  # links per (spine, core) pair
    steps: tuple[str, ...] = field(default=(), compare=False)

    @property
    def switches(self) -> int:
        return self.leaves + self.spines + self.cores


def two_level(leaves: int, hosts: int, leaf_up: int, ports: int) -> TreeShape | None:
    """Spines for `leaves` leaves of `leaf_up` uplinks, or None when 2 levels cannot hold them."""
    needed = leaves * leaf_up
    spines = fewest_dividing(needed, ports, leaf_up)
    if spines is None:
        return None
    steps = (
        f"{leaves:,} leaves × ({hosts} hosts + {leaf_up} uplinks)",
        f"uplinks: {leaves:,} leaves × {leaf_up} = {needed:,}; spines must divide {leaf_up} "
        f"and offer {needed:,} ports → {spines} spines × {ports} = {spines * ports:,} ports "
        f"({leaf_up // spines} link(s) from every leaf to every spine)",
    )
    return TreeShape(2, leaves, hosts, leaf_up, spines, 1, leaves, spines, leaf_up // spines, steps=steps)


def three_level(leaves: int, hosts: int, leaf_up: int, ports: int) -> TreeShape | None:
    """Pods of leaves and spines under a core layer, keeping symmetry at both levels.

    Pods are made as large as the spines allow (one link from every leaf to every pod spine
    when possible): the conventional k-ary tree, with the most paths per leaf.
    """
    best: TreeShape | None = None
    for spines_per_pod in reversed(divisors(leaf_up)):
        per_pair = leaf_up // spines_per_pod
        pod_max = (ports // 2) // per_pair  # spines stay non-blocking: half their ports down
        if pod_max == 0:
            continue
        pods = -(-leaves // pod_max)
        per_pod = -(-leaves // pods)
        spine_up = per_pod * per_pair
        cores_per_group = fewest_dividing(pods * spine_up, ports, spine_up)
        if cores_per_group is None:
            continue
        cores = spines_per_pod * cores_per_group
        if best is None:
            steps = (
                f"pods: {pods} of {per_pod} leaves; each leaf sends {per_pair} link(s) to each "
                f"of its pod's {spines_per_pod} spines → {pods * spines_per_pod:,} spines",
                f"spine uplinks: {spine_up} each; each core group serves one spine plane of "
                f"{pods} spines = {pods * spine_up:,} links → {cores_per_group} cores dividing "
                f"{spine_up} × {spines_per_pod} planes = {cores:,} cores",
            )
            best = TreeShape(
                3,
                leaves,
                hosts,
                leaf_up,
                pods * spines_per_pod,
                pods,
                per_pod,
                spines_per_pod,
                per_pair,
                spine_up,
                cores_per_group,
                cores,
                spine_up // cores_per_group,
                steps,
            )
    return best


def max_endpoints(ports: int, down: int, up: int, levels: int) -> int:
    hosts, _ = leaf_split(ports, down, up)
    if levels == 1:
        return ports
    if levels == 2:
        return ports * hosts
    return ports * (ports // 2) * hosts


def tree_shape(
    endpoints: int,
    ports: int,
    down: int = 1,
    up: int = 1,
    levels: int | None = None,
    model: str = "switch",
) -> TreeShape:
    """The smallest fat tree of `ports`-port switches for `endpoints` host ports."""
    if endpoints <= 0:
        raise PlanError("a fat tree needs at least one endpoint", element="gpus")
    hosts_max, _ = leaf_split(ports, down, up)
    ratio = f"{down}:{up}"
    if hosts_max == 0:
        raise PlanError(
            f"{model} has {ports} ports: too few for {ratio} (needs at least {down + up})",
            element="oversubscription",
        )
    if levels in (None, 1) and endpoints <= ports:
        return TreeShape(1, 1, endpoints, 0, steps=(f"{endpoints} endpoints fit one {model}",))
    if levels == 1:
        raise PlanError(
            f"one {model} has {ports} ports, {endpoints:,} endpoints requested: use levels 2 or auto",
            element="levels",
        )
    first = -(-endpoints // hosts_max)
    head = (
        f"leaf: {ports} ports = {hosts_max} down + {ports - hosts_max} up at {ratio}; "
        f"leaves: ⌈{endpoints:,} / {hosts_max}⌉ = {first:,}",
    )
    two_level_fits = endpoints <= max_endpoints(ports, down, up, 2)
    if levels in (None, 2) and two_level_fits:
        # Bounded: within two levels the leaf count is at most the switch's port count.
        best: TreeShape | None = None
        for leaves in range(first, min(endpoints, 2 * first + 8) + 1):
            hosts = -(-endpoints // leaves)
            shape = two_level(leaves, hosts, uplinks_for(hosts, down, up), ports)
            if shape and (best is None or shape.switches < best.switches):
                best = shape
        if best is not None:
            return TreeShape(**{**best.__dict__, "steps": head + best.steps})
    if levels == 2:
        raise PlanError(
            f"2 levels of {model} ({ports} ports) reach at most "
            f"{max_endpoints(ports, down, up, 2):,} endpoints at {ratio}; {endpoints:,} "
            f"requested: use levels 3 or auto",
            element="levels",
        )
    if endpoints > max_endpoints(ports, down, up, 3):
        raise PlanError(
            f"3 levels of {model} ({ports} ports) reach at most "
            f"{max_endpoints(ports, down, up, 3):,} endpoints at {ratio}; {endpoints:,} "
            f"requested: choose a switch with more ports or oversubscribe",
            element="gpus",
        )
    hosts = -(-endpoints // first)
    shape = three_level(first, hosts, uplinks_for(hosts, down, up), ports)
    if shape is None:
        raise PlanError(
            f"3 levels of {model} ({ports} ports) reach at most "
            f"{max_endpoints(ports, down, up, 3):,} endpoints at {ratio}; {endpoints:,} "
            f"requested: choose a switch with more ports or oversubscribe",
            element="gpus",
        )
    return TreeShape(**{**shape.__dict__, "steps": head + shape.steps})


def fixed_leaves_shape(
    leaves: int,
    hosts: int,
    ports: int,
    down: int,
    up: int,
    levels: int | None,
    model: str,
    leaf_name: str = "leaf",
) -> TreeShape:
    """Tree above a fixed set of leaves with `hosts` slots each (rail-optimised SUs)."""
    leaf_up = uplinks_for(hosts, down, up)
    if hosts + leaf_up > ports:
        left = max(0, ports - hosts)
        ratio_need = -(-hosts // left) if left else 0
        bigger = f"a {hosts + leaf_up}-port model"
        fix = f"choose {ratio_need}:1 oversubscription or {bigger}" if left else f"choose {bigger}"
        raise PlanError(
            f"{leaf_name} needs {hosts + leaf_up} ports ({hosts} down + {leaf_up} up at "
            f"{down}:{up}), {model} has {ports}: {left} left for uplinks, {leaf_up} needed: "
            f"{fix} or fewer node slots per leaf",
            element=leaf_name,
        )
    if levels == 1:
        raise PlanError("rail-optimised fabrics need at least 2 levels", element="levels")
    if levels in (None, 2):
        shape = two_level(leaves, hosts, leaf_up, ports)
        if shape is not None:
            return shape
        if levels == 2:
            raise PlanError(
                f"2 levels of {model} ({ports} ports) hold at most {ports} leaves at "
                f"{down}:{up}; {leaves:,} needed: use levels 3 or auto",
                element="levels",
            )
    shape = three_level(leaves, hosts, leaf_up, ports)
    if shape is None:
        raise PlanError(
            f"3 levels of {model} ({ports} ports) cannot hold {leaves:,} leaves: choose a switch with more ports",
            element="gpus",
        )
    return shape
