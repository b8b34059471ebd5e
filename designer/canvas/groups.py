"""Which box each switch is drawn in, and the one pass over a graph's links every level starts from.

A switch belongs to its pod (fat tree, dragonfly+ group), else its scalable unit (rail-optimised),
else its torus plane, else a box for its tier (the spines of a 2-level fabric, the cores). In a
3-level rail-optimised design a leaf has both: it is drawn in its pod, and the pod's scalable units
are a level of their own between the fabric and the switches (designer.canvas.su).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from designer.graph import FabricGraph, Link, Switch

TIER_RANK = {"core": 0, "spine": 1, "leaf": 2, "torus": 2}


def tier_rank(tier: str) -> int:
    """Row of a tier, top (core) first; unknown tiers sit with the leaves."""
    return TIER_RANK.get(tier, 2)


def group_of(sw: Switch) -> str:
    """The box a switch is drawn in at fabric level."""
    if sw.pod >= 0:
        return f"pod-{sw.pod + 1}"
    if sw.su >= 0:
        return f"su-{sw.su + 1}"
    if len(sw.coords) == 3:
        return f"plane-{sw.coords[2] + 1}"
    return f"tier-{sw.tier}"


def su_of(sw: Switch) -> str | None:
    """The scalable unit a switch of a pod belongs to (3-level rail-optimised leaves), if any."""
    return f"su-{sw.su + 1}" if sw.pod >= 0 and sw.su >= 0 else None


def group_label(group: str, topology: str) -> str:
    """What a user calls a group: "Pod 3", "SU 1", "Plane z=0", "Spine tier"."""
    kind, _, rest = group.partition("-")
    if kind == "pod":
        return f"{'Group' if topology == 'dragonfly-plus' else 'Pod'} {rest}"
    if kind == "su":
        return f"SU {rest}"
    if kind == "plane":
        return f"Plane z={int(rest) - 1}"
    return f"{rest.capitalize()} tier"


def count_label(n: int, tier: str) -> str:
    """ "8 leaves", "1 spine", "16 torus switches"."""
    if tier == "leaf":
        return f"{n} {'leaf' if n == 1 else 'leaves'}"
    if tier in TIER_RANK and tier != "torus":
        return f"{n} {tier}{'' if n == 1 else 's'}"
    return f"{n} {tier} switch{'' if n == 1 else 'es'}"


def is_tier_group(group: str) -> bool:
    """A group that holds a whole tier (global spines, cores) rather than one pod or SU."""
    return group.startswith("tier-")


GROUP_ORDER = {"su": 0, "pod": 1, "plane": 2}


def _group_sort_key(group: str) -> tuple[int, str, int]:
    kind, _, rest = group.partition("-")
    if kind == "tier":
        return (1, f"{tier_rank(rest)}{rest}", 0)  # top tier first
    # a focused SU's siblings before the other pods
    return (0, f"{GROUP_ORDER.get(kind, 9)}{kind}", int(rest) if rest.isdigit() else 0)


class CanvasIndex:
    """One pass over the links: usage per device, hosts per switch, groups.

    ``regroup`` (switch → group) draws some switches in another box than their own: a pod's
    leaves in their scalable units when one of those is focused.
    """

    def __init__(self, graph: FabricGraph, regroup: dict[str, str] | None = None) -> None:
        self.graph = graph
        self.used: Counter[str] = Counter()
        self.hosts: dict[str, list[Link]] = defaultdict(list)
        self.group: dict[str, str] = {}
        self.members: dict[str, list[str]] = defaultdict(list)
        # Scalable units inside pods: su id → its pod and its leaves, pod → its su ids.
        self.su_pod: dict[str, str] = {}
        self.su_members: dict[str, list[str]] = defaultdict(list)
        self.sus: dict[str, list[str]] = defaultdict(list)
        for name, sw in graph.switches.items():
            g = group_of(sw)
            su = su_of(sw)
            if su is not None:
                self.su_members[su].append(name)
                self.su_pod.setdefault(su, g)  # an SU split between two pods is named after the first
                if su not in self.sus[g]:
                    self.sus[g].append(su)
            g = regroup.get(name, g) if regroup else g
            self.group[name] = g
            self.members[g].append(name)
        switches = graph.switches
        for lk in graph.links:
            self.used[lk.a] += 1
            self.used[lk.b] += 1
            if lk.a not in switches and lk.b in switches:
                self.hosts[lk.b].append(lk)
            elif lk.b not in switches and lk.a in switches:
                self.hosts[lk.a].append(lk)
        self.groups = sorted(self.members, key=_group_sort_key)
        self.ports_total: dict[str, int] = {}
        # A revision diff drawn on the canvas (designer.canvas.diff): status per switch and link key.
        self.switch_status: dict[str, str] = {}
        self.link_status: dict[tuple, str] = {}

    def units_of(self, pod: str) -> CanvasIndex:
        """This index with the pod's leaves drawn in their scalable units (the pod keeps its
        spines), and the same diff marks: the SU levels' view of one pod."""
        switches = self.graph.switches
        regroup = {m: su for m in self.members[pod] if (su := su_of(switches[m])) is not None}
        scoped = CanvasIndex(self.graph, regroup=regroup)
        scoped.link_status, scoped.switch_status = self.link_status, self.switch_status
        return scoped

    def status(self, lk: Link) -> str | None:
        """The link's part in the diff drawn, if any."""
        return self.link_status.get(lk.key()) if self.link_status else None

    def group_status(self, group: str) -> dict[str, int]:
        """Switches of a group added, removed or changed in the diff drawn."""
        out: Counter[str] = Counter()
        if self.switch_status:
            for m in self.members[group]:
                if m in self.switch_status:
                    out[self.switch_status[m]] += 1
        return dict(out)

    def total(self, device: str) -> int:
        """Ports of a device (cached: the graph works it out from the catalogue)."""
        n = self.ports_total.get(device)
        if n is None:
            n = self.ports_total[device] = self.graph.port_count(device)
        return n
