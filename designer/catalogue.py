"""Hardware catalogue: switch models, node types, cable and transceiver types, and lookups by name.

Prices and power figures are editable list-price estimates (USD, watts) meant for comparing
designs, not quotes. The seeded items are in `designer.builtin_catalogue`; operators' overrides
are loaded from the database into these same frozen dataclasses. Model names are matched in any
case (`qm9700` is `QM9700`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from designer.errors import UnknownItemError

_Item = TypeVar("_Item")

#: InfiniBand generations, their per-port rate on a 4x link and per-lane rate (Gb/s).
GENERATIONS: dict[str, int] = {
    "SDR": 10,
    "DDR": 20,
    "QDR": 40,
    "FDR": 56,
    "EDR": 100,
    "HDR": 200,
    "NDR": 400,
    "XDR": 800,
}
LANE_GBPS: dict[str, float] = {"SDR": 2.5, "DDR": 5, "QDR": 10, "FDR": 14, "EDR": 25, "HDR": 50, "NDR": 100, "XDR": 200}
GENERATION_ORDER: tuple[str, ...] = tuple(GENERATIONS)

#: Cable kinds, from cheapest/shortest to longest reach.
CABLE_KINDS = ("passive_copper", "active_copper", "aoc", "mm_fibre", "sm_fibre", "splitter")
OPTICAL_KINDS = frozenset({"mm_fibre", "sm_fibre"})

#: Standard cable lengths (m) offered; a run is rounded up to the next one.
STANDARD_LENGTHS_M: tuple[float, ...] = (
    0.5,
    1,
    1.5,
    2,
    2.5,
    3,
    4,
    5,
    7,
    10,
    15,
    20,
    25,
    30,
    40,
    50,
    70,
    100,
    150,
    200,
    300,
    500,
    1000,
    2000,
)


def generation_rank(speed: str) -> int:
    """Position of an InfiniBand generation in time order (unknown → -1)."""
    try:
        return GENERATION_ORDER.index(speed)
    except ValueError:
        return -1


def width_speed(generation: str, gbps: float) -> str:
    """ibnetdiscover's link label, e.g. ("NDR", 400) → "4xNDR", ("NDR", 200) → "2xNDR"."""
    lane = LANE_GBPS.get(generation, 0)
    width = max(1, round(gbps / lane)) if lane else 4
    return f"{width}x{generation}"


def standard_length(length_m: float) -> float:
    """The shortest standard cable length that covers a run."""
    for candidate in STANDARD_LENGTHS_M:
        if candidate >= length_m - 1e-9:
            return float(candidate)
    return float(math.ceil(length_m))


@dataclass(frozen=True, slots=True)
class SwitchModel:
    """A switch model: its ports, cages, speed, split modes, cost figures and SHARP trees."""

    name: str
    ports: int
    cages: int
    speed: str  # generation, e.g. "NDR"
    port_gbps: int
    split_modes: dict[str, tuple[int, int]] = field(default_factory=dict)  # mode → (ports, gbps)
    power_w: float = 0.0
    list_price: float = 0.0
    hop_latency_ns: float = 0.0
    vendor_id: int = 0x02C9
    device_id: int = 0
    rack_units: int = 1
    modular: bool = False
    description: str = ""
    #: Concurrent SHARP streaming-aggregation trees the switch serves (0: not SHARP-capable).
    #: The built-in figures cite NVIDIA's SHARP release notes (``designer.builtin_catalogue``).
    sharp_trees: int = 0

    @property
    def ports_per_cage(self) -> int:
        return max(1, self.ports // max(1, self.cages))

    def port_layout(self, split: str | None) -> tuple[int, int]:
        """(ports, gbps) in the given split mode (None = unsplit)."""
        if not split:
            return self.ports, self.port_gbps
        return self.split_modes[split]

    def cage_of(self, port: int, split: str | None = None) -> int:
        """0-based cage index of a 1-based port number."""
        ports, _ = self.port_layout(split)
        per_cage = max(1, ports // max(1, self.cages))
        return (port - 1) // per_cage


@dataclass(frozen=True, slots=True)
class NodeType:
    """A server type: its GPUs, compute HCAs (one per rail) and cost figures."""

    name: str
    gpus: int
    hcas: int
    gpu_model: str = ""
    power_w: float = 0.0  # busy (all GPUs loaded)
    price: float = 0.0
    hca_speed: str = "NDR"
    hca_gbps: int = 400
    hca_device_id: int = 0x1021  # ConnectX-7
    rack_units: int = 2
    per_rack: int = 8  # how many fit in a rack within its power budget
    role: str = "compute"  # compute | manager
    idle_power_w: float = 0.0  # powered on, no job; 0: a fifth of `power_w`
    off_power_w: float = 0.0  # powered off, BMC on standby
    boot_s: int = 300  # power-on to OS up and HCA ports active

    def idle_watts(self) -> float:
        """Draw when on and idle: the catalogue figure, or a fifth of the busy draw when unset."""
        return self.idle_power_w or self.power_w / 5


@dataclass(frozen=True, slots=True)
class CableType:
    """A cable family of one generation: reach, price and whether it needs transceivers."""

    name: str
    kind: str  # one of CABLE_KINDS
    max_speed: str  # highest generation it carries
    reach_min_m: float
    reach_max_m: float
    price: float
    needs_transceiver: bool = False
    transceiver: str = ""  # TransceiverType name used at each end when needs_transceiver
    power_w: float = 0.0  # per cable (active copper / AOC electronics)

    def carries(self, generation: str) -> bool:
        return generation_rank(generation) <= generation_rank(self.max_speed) and (
            generation_rank(self.max_speed) - generation_rank(generation) <= 1
        )


@dataclass(frozen=True, slots=True)
class TransceiverType:
    """A pluggable optic; on twin-port switch cages one module serves two ports."""

    name: str
    speed: str
    price: float
    power_w: float


def find_item(table: dict[str, _Item], name: str) -> _Item | None:
    """The item called `name`, spelt in any case (`qm9700` is `QM9700`); None when unknown.

    An exact spelling wins, so two operator entries that differ only in case stay reachable.
    """
    item = table.get(name)
    if item is not None:
        return item
    folded = name.casefold()
    for key, candidate in table.items():
        if key.casefold() == folded:
            return candidate
    return None


def _canonical_key(table: dict[str, Any], name: str) -> str:
    """The key `name` already has in `table` in another case, or `name` itself when it is new."""
    if name in table:
        return name
    folded = name.casefold()
    return next((key for key in table if key.casefold() == folded), name)


@dataclass
class Catalogue:
    """The editable set of models a design draws from."""

    switches: dict[str, SwitchModel] = field(default_factory=dict)
    nodes: dict[str, NodeType] = field(default_factory=dict)
    cables: dict[str, CableType] = field(default_factory=dict)
    transceivers: dict[str, TransceiverType] = field(default_factory=dict)

    def switch(self, name: str) -> SwitchModel:
        """A switch model by name in any case; its `name` is the catalogue's spelling."""
        model = find_item(self.switches, name)
        if model is None:
            raise UnknownItemError("switch model", name, sorted(self.switches))
        return model

    def node_type(self, name: str) -> NodeType:
        """A node type by name in any case; its `name` is the catalogue's spelling."""
        node_type = find_item(self.nodes, name)
        if node_type is None:
            raise UnknownItemError("node type", name, sorted(self.nodes))
        return node_type

    def cable(self, name: str) -> CableType:
        """A cable type by name in any case."""
        cable = find_item(self.cables, name)
        if cable is None:
            raise UnknownItemError("cable type", name, sorted(self.cables))
        return cable

    def copy(self) -> Catalogue:
        return Catalogue(dict(self.switches), dict(self.nodes), dict(self.cables), dict(self.transceivers))

    def with_items(self, *items: SwitchModel | NodeType | CableType | TransceiverType) -> Catalogue:
        """A copy with items added or replaced by name in any case (operators' overrides).

        An override spelt `q3400` replaces `Q3400` and keeps the catalogue's spelling, so designs
        that name the model keep finding it.
        """
        new = self.copy()
        tables: dict[type, dict[str, Any]] = {
            SwitchModel: new.switches,
            NodeType: new.nodes,
            CableType: new.cables,
            TransceiverType: new.transceivers,
        }
        for item in items:
            table = tables[type(item)]
            key = _canonical_key(table, item.name)
            table[key] = item if key == item.name else replace(item, name=key)
        return new

    def with_prices(self, prices: dict[str, float]) -> Catalogue:
        """A copy with list prices overridden by item name (any case)."""
        new = self.copy()
        for name, price in prices.items():
            if (switch := find_item(new.switches, name)) is not None:
                new.switches[switch.name] = replace(switch, list_price=price)
            elif (node := find_item(new.nodes, name)) is not None:
                new.nodes[node.name] = replace(node, price=price)
            elif (cable := find_item(new.cables, name)) is not None:
                new.cables[cable.name] = replace(cable, price=price)
            elif (optic := find_item(new.transceivers, name)) is not None:
                new.transceivers[optic.name] = replace(optic, price=price)
            else:
                known = sorted([*new.switches, *new.nodes, *new.cables, *new.transceivers])
                raise UnknownItemError("catalogue item", name, known)
        return new

    def effective_cable_price(self, cable: CableType) -> float:
        """Cable plus the two optics it needs: what a run really costs."""
        if not cable.needs_transceiver:
            return cable.price
        optic = self.transceivers.get(cable.transceiver)
        return cable.price + 2 * (optic.price if optic else 0.0)

    def cable_choices(self, generation: str, *, splitter: bool = False) -> list[CableType]:
        """Cables able to carry a generation, cheapest first (splitters only when asked)."""
        usable = [c for c in self.cables.values() if c.carries(generation) and ((c.kind == "splitter") == splitter)]
        usable.sort(key=lambda c: (self.effective_cable_price(c), c.reach_max_m))
        return usable

    def cheapest_cable(self, generation: str, length_m: float, *, splitter: bool = False) -> CableType | None:
        """The cheapest cable whose reach covers the run, or None if nothing reaches."""
        for cable in self.cable_choices(generation, splitter=splitter):
            if cable.reach_max_m + 1e-9 >= length_m:
                return cable
        if splitter:  # past a splitter's reach, the ports are cabled one by one
            return self.cheapest_cable(generation, length_m)
        return None
