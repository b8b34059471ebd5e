"""The in-memory fabric graph: switches, nodes (with their HCAs), links and racks.

Kept as plain slotted records in dicts and one list of links so a 16,384-GPU fabric (50k links)
builds and validates in well under a second. The graph is editable (add/remove switches, connect
and disconnect ports, change cables) and makes no assumption that a generator produced it.

Port numbering: a switch port is 1..ports (in its split mode); a node's port p is its p-th
compute HCA (1-based), which is port `ca_ports[p-1]` of the channel adapter `ca_guids[p-1]`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from designer.catalogue import Catalogue, SwitchModel
from designer.errors import PlanError

#: Planned GUID bases (Mellanox OUI 0x0002c9); switches and channel adapters never overlap.
SWITCH_GUID_BASE = 0x0002C90200000000
CA_GUID_BASE = 0x0002C90300000000
#: Characters that break ibnetdiscover/ibsim names or node descriptions.
FORBIDDEN_NAME_CHARS = frozenset('"#@;:\n\t ')


def planned_switch_guid(index: int) -> int:
    """Deterministic node GUID of the index-th planned switch."""
    return SWITCH_GUID_BASE + index + 1


def planned_ca_guid(node_index: int, hca_index: int) -> int:
    """Deterministic node GUID of a planned HCA; its port 1 GUID is this + 1 (as in ibsim)."""
    return CA_GUID_BASE + (node_index << 8) + (hca_index << 1)


@dataclass(slots=True)
class Rack:
    """A rack on the floor plan: `row` and `position` give its place, in rack pitches."""

    name: str
    row: int
    position: int
    kind: str = "compute"  # compute | network


@dataclass(slots=True)
class Switch:
    """A switch: model, role in the topology, planned GUID and place."""

    name: str
    model: str
    tier: str  # leaf | spine | core | torus | ...
    guid: int
    rack: str = ""
    u: int = 0  # lowest rack unit it occupies
    su: int = -1  # scalable unit (rail-optimised) or -1
    pod: int = -1  # pod (3 levels) or dragonfly+ group, or -1
    index: int = 0  # rail, spine plane or position within its tier
    split: str | None = None
    coords: tuple[int, ...] = ()  # torus coordinates


@dataclass(slots=True)
class Node:
    """A server: its compute HCAs with their GUIDs and rails, and its place."""

    name: str
    node_type: str
    ca_guids: tuple[int, ...]  # node GUID of the channel adapter behind each node port
    port_guids: tuple[int, ...]
    ca_ports: tuple[int, ...] = ()  # CA port number of each node port (1 for single-port HCAs)
    rails: tuple[int, ...] = ()
    su: int = -1
    rack: str = ""
    u: int = 0
    role: str = "compute"  # compute | manager
    gpus: int = 0
    hca_names: tuple[str, ...] = ()  # e.g. ("mlx5_0", …) from discovery; default "HCA-<n>"

    def hca_name(self, port: int) -> str:
        """Name of the HCA behind node port `port` (1-based), as in its IB node description."""
        if len(self.hca_names) >= port and self.hca_names[port - 1]:
            return self.hca_names[port - 1]
        return f"HCA-{port}"

    @property
    def hcas(self) -> int:
        return len(self.port_guids)


@dataclass(slots=True)
class Link:
    """A cable between two ports; `a` is the lower end (node or lower-tier switch)."""

    a: str
    a_port: int
    b: str
    b_port: int
    tier: str  # node_leaf | leaf_spine | spine_core | torus | global | ...
    cable: str = ""
    length_m: float = 0.0

    def ends(self) -> tuple[tuple[str, int], tuple[str, int]]:
        return (self.a, self.a_port), (self.b, self.b_port)

    def key(self) -> tuple[tuple[str, int], tuple[str, int]]:
        """Orientation-free identity of the link (for diffs and round-trips)."""
        x, y = (self.a, self.a_port), (self.b, self.b_port)
        return (x, y) if x <= y else (y, x)


@dataclass
class FabricGraph:
    """A fabric: the catalogue it draws from, its devices, links, racks and design metadata."""

    catalogue: Catalogue
    topology: str = "custom"
    switches: dict[str, Switch] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    racks: dict[str, Rack] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    _port_index: dict[tuple[str, int], Link] | None = field(default=None, repr=False)

    # ---- lookups -------------------------------------------------------------------------
    def switch_model(self, name: str) -> SwitchModel:
        return self.catalogue.switch(self.switches[name].model)

    def port_count(self, device: str) -> int:
        sw = self.switches.get(device)
        if sw is not None:
            model = self.catalogue.switches.get(sw.model)
            if model is None:
                return 0
            return model.port_layout(sw.split if sw.split in model.split_modes else None)[0]
        node = self.nodes.get(device)
        if node is None:
            raise KeyError(device)
        return node.hcas

    def port_gbps(self, device: str, port: int) -> tuple[str, int]:
        """(generation, Gb/s) a port runs at on its own."""
        sw = self.switches.get(device)
        if sw is not None:
            model = self.catalogue.switches.get(sw.model)
            if model is None:
                return "", 0
            split = sw.split if sw.split in model.split_modes else None
            return model.speed, model.port_layout(split)[1]
        node_type = self.catalogue.nodes.get(self.nodes[device].node_type)
        if node_type is None:
            return "", 0
        return node_type.hca_speed, node_type.hca_gbps

    def is_switch(self, device: str) -> bool:
        return device in self.switches

    def has_device(self, device: str) -> bool:
        return device in self.switches or device in self.nodes

    @property
    def port_index(self) -> dict[tuple[str, int], Link]:
        """(device, port) → link; rebuilt lazily after edits."""
        if self._port_index is None:
            index: dict[tuple[str, int], Link] = {}
            for link in self.links:
                index[(link.a, link.a_port)] = link
                index[(link.b, link.b_port)] = link
            self._port_index = index
        return self._port_index

    def link_at(self, device: str, port: int) -> Link | None:
        return self.port_index.get((device, port))

    def links_of(self, device: str) -> list[Link]:
        return [lk for lk in self.links if lk.a == device or lk.b == device]

    def used_ports(self, device: str) -> list[int]:
        return sorted(p for (d, p) in self.port_index if d == device)

    def free_ports(self, device: str) -> list[int]:
        used = set(self.used_ports(device))
        return [p for p in range(1, self.port_count(device) + 1) if p not in used]

    def endpoints(self) -> int:
        return sum(n.hcas for n in self.nodes.values())

    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes.values())

    def tiers(self) -> list[str]:
        seen: dict[str, None] = {}
        for sw in self.switches.values():
            seen.setdefault(sw.tier, None)
        return list(seen)

    def iter_devices(self) -> Iterator[str]:
        yield from self.switches
        yield from self.nodes

    # ---- edits ---------------------------------------------------------------------------
    def _touch(self) -> None:
        self._port_index = None

    def next_switch_guid(self) -> int:
        used = {sw.guid for sw in self.switches.values()}
        guid = planned_switch_guid(len(self.switches))
        while guid in used:
            guid += 1
        return guid

    def add_switch(self, name: str, model: str, tier: str, *, guid: int | None = None, **place: object) -> Switch:
        """Add a switch (GUID planned if not given); raises PlanError on a clash."""
        check_name(name)
        if self.has_device(name):
            raise PlanError(f"{name} already exists: choose another name", element=name)
        model = self.catalogue.switch(model).name  # the catalogue's spelling, whatever case was given
        sw = Switch(name, model, tier, guid if guid is not None else self.next_switch_guid())
        for key, value in place.items():
            setattr(sw, key, value)
        self.switches[name] = sw
        return sw

    def add_node(self, node: Node) -> Node:
        check_name(node.name)
        if self.has_device(node.name):
            raise PlanError(f"{node.name} already exists: choose another name", element=node.name)
        self.nodes[node.name] = node
        return node

    def remove_device(self, name: str) -> list[Link]:
        """Remove a switch or node and every link on it; returns the removed links."""
        if name in self.switches:
            del self.switches[name]
        elif name in self.nodes:
            del self.nodes[name]
        else:
            raise PlanError(f"{name} does not exist", element=name)
        removed = [lk for lk in self.links if lk.a == name or lk.b == name]
        if removed:
            self.links = [lk for lk in self.links if lk.a != name and lk.b != name]
        self._touch()
        return removed

    remove_switch = remove_device
    remove_node = remove_device

    def connect(
        self,
        a: str,
        a_port: int,
        b: str,
        b_port: int,
        *,
        cable: str = "",
        length_m: float = 0.0,
        tier: str | None = None,
    ) -> Link:
        """Cable two free ports together; raises PlanError naming the busy or missing port."""
        for dev, port in ((a, a_port), (b, b_port)):
            if not self.has_device(dev):
                raise PlanError(f"{dev} does not exist", element=dev)
            count = self.port_count(dev)
            if not 1 <= port <= count:
                raise PlanError(f"{dev} has no port {port}: ports are 1..{count}", element=f"{dev}[{port}]")
            busy = self.link_at(dev, port)
            if busy is not None:
                other = busy.b if (busy.a, busy.a_port) == (dev, port) else busy.a
                raise PlanError(
                    f"{dev}[{port}] is already cabled to {other}: free ports are "
                    f"{compress_ints(self.free_ports(dev)) or 'none'}",
                    element=f"{dev}[{port}]",
                )
        if (a, a_port) == (b, b_port):
            raise PlanError(f"{a}[{a_port}] cannot be cabled to itself", element=a)
        if cable:
            self.catalogue.cable(cable)
        link = Link(a, a_port, b, b_port, tier or self.link_tier(a, b), cable, length_m)
        self.links.append(link)
        if self._port_index is not None:
            self._port_index[(a, a_port)] = link
            self._port_index[(b, b_port)] = link
        return link

    def disconnect(self, device: str, port: int) -> Link | None:
        """Remove the cable on a port (None if it was free)."""
        link = self.link_at(device, port)
        if link is None:
            return None
        self.links.remove(link)
        self._touch()
        return link

    def set_cable(self, device: str, port: int, cable: str) -> Link:
        link = self.link_at(device, port)
        if link is None:
            raise PlanError(f"{device}[{port}] has no cable", element=f"{device}[{port}]")
        self.catalogue.cable(cable)
        link.cable = cable
        return link

    def link_tier(self, a: str, b: str) -> str:
        """Conventional tier name of a link between two devices."""
        ta = self.switches[a].tier if a in self.switches else "node"
        tb = self.switches[b].tier if b in self.switches else "node"
        order = {"node": 0, "leaf": 1, "spine": 2, "core": 3}
        if order.get(ta, 9) > order.get(tb, 9):
            ta, tb = tb, ta
        if ta == tb == "spine" and self.topology == "dragonfly-plus":
            return "global"
        if ta == tb:
            return ta
        if ta == "node" and tb not in ("leaf",):
            return f"node_{tb}" if tb != "torus" else "node_switch"
        return f"{ta}_{tb}"

    def copy(self) -> FabricGraph:
        """A deep-enough copy for editing (records are copied, the catalogue is shared)."""
        return FabricGraph(
            self.catalogue,
            self.topology,
            {k: replace(v) for k, v in self.switches.items()},
            {k: replace(v) for k, v in self.nodes.items()},
            [replace(lk) for lk in self.links],
            {k: replace(v) for k, v in self.racks.items()},
            dict(self.meta),
        )


def check_name(name: str) -> None:
    """Names become IB node descriptions: keep them short and free of reserved characters."""
    bad = sorted({c for c in name if c in FORBIDDEN_NAME_CHARS})
    if not name or len(name) > 40 or bad:
        why = "empty" if not name else f"longer than 40 characters ({len(name)})"
        if bad:
            why = f"contains {' '.join(repr(c) for c in bad)}"
        raise PlanError(f"device name {name!r} is {why}: use letters, digits, '-', '_' or '.'")


def compress_ints(values: list[int]) -> str:
    """[1,2,3,7,9,10] → "1-3,7,9-10" for readable messages."""
    out: list[str] = []
    values = sorted(values)
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(out)
