"""Floor plan: racks in rows, devices at rack units, cable lengths and cable choice.

Rows run along x; racks are RACK_PITCH_M wide and rows ROW_PITCH_M apart (rack depth plus
an aisle). Cables between racks go up to an overhead tray, along it (Manhattan distance) and
down, plus slack; within a rack they run vertically. Each run is rounded up to a standard
length, and gets the cheapest cable type whose reach covers it.
"""

from __future__ import annotations

from dataclasses import dataclass

from designer.catalogue import generation_rank, standard_length
from designer.graph import FabricGraph, Rack

RACK_PITCH_M = 0.6
ROW_PITCH_M = 2.4
RACK_UNITS = 42
U_M = 0.0445
TRAY_HEIGHT_M = 2.2
SLACK_BETWEEN_RACKS_M = 1.0
SLACK_IN_RACK_M = 0.5
SWITCHES_PER_NETWORK_RACK = 16


@dataclass
class Cell:
    """Nodes racked together, with optional top-of-rack switches in their first rack."""

    nodes: list[str]
    tor_switches: list[str]


def alternate_row(i: int) -> int:
    """Rows 1, -1, 2, -2, … either side of a central network row 0."""
    return (i // 2 + 1) * (1 if i % 2 == 0 else -1)


class FloorPlan:
    """Places racks and devices on a graph; positions are integers in rack pitches."""

    def __init__(self, graph: FabricGraph) -> None:
        self.graph = graph
        self.rack_count = 0

    def new_rack(self, row: int, position: int, kind: str) -> Rack:
        self.rack_count += 1
        name = f"{'r' if kind == 'compute' else 'n'}{self.rack_count:04d}"
        rack = Rack(name, row, position, kind)
        self.graph.racks[name] = rack
        return rack

    def _network_racks(self, row: int, position: int, switches: list[str]) -> int:
        """Put switches in network racks from `position`; returns racks used."""
        graph = self.graph
        used = count = 0
        rack: Rack | None = None
        top = free = 0
        for name in switches:
            sw = graph.switches[name]
            model = graph.catalogue.switches.get(sw.model)
            need = (model.rack_units if model else 1) + 1  # with a patch panel
            if rack is None or need > free or count >= SWITCHES_PER_NETWORK_RACK:
                rack = self.new_rack(row, position + used, "network")
                used += 1
                count, top, free = 0, RACK_UNITS - 1, RACK_UNITS - 2
            sw.rack, sw.u = rack.name, top - need + 2
            top -= need
            free -= need
            count += 1
        return used

    def _compute_racks(self, row: int, position: int, cells: list[Cell]) -> int:
        graph = self.graph
        used = 0
        for cell in cells:
            rack = None
            slot = 0
            per_rack = 1
            first = True
            for name in cell.nodes:
                node = graph.nodes[name]
                nt = graph.catalogue.nodes.get(node.node_type)
                per_rack = nt.per_rack if nt else 8
                height = nt.rack_units if nt else 2
                if rack is None or slot >= per_rack:
                    rack = self.new_rack(row, position + used, "compute")
                    used += 1
                    slot = 0
                    if first:
                        for i, sw_name in enumerate(cell.tor_switches):
                            sw = graph.switches[sw_name]
                            sw.rack, sw.u = rack.name, RACK_UNITS - 1 - i
                        first = False
                node.rack, node.u = rack.name, 2 + slot * height
                slot += 1
            if first and cell.tor_switches:  # a switch without hosts still needs a home
                rack = self.new_rack(row, position + used, "network")
                used += 1
                for i, sw_name in enumerate(cell.tor_switches):
                    sw = graph.switches[sw_name]
                    sw.rack, sw.u = rack.name, RACK_UNITS - 1 - i
        return used

    def row(self, row: int, cells: list[Cell], switches: list[str], offset: int = 0) -> int:
        """A row of compute racks with the row's network racks in the middle."""
        half = (len(cells) + 1) // 2
        used = self._compute_racks(row, offset, cells[:half])
        used += self._network_racks(row, offset + used, switches)
        used += self._compute_racks(row, offset + used, cells[half:])
        return used

    def central_row(self, switches: list[str], row: int = 0, offset: int = 0) -> int:
        return self._network_racks(row, offset, switches)


def row_width(graph: FabricGraph, nodes: int, node_type: str, switches: int) -> int:
    """Racks a row of `nodes` nodes plus `switches` 1U switches will take."""
    nt = graph.catalogue.nodes.get(node_type)
    per_rack = nt.per_rack if nt else 8
    return -(-nodes // per_rack) + -(-switches // SWITCHES_PER_NETWORK_RACK)


def assign_cables(graph: FabricGraph) -> None:
    """Compute every link's length from the floor plan and pick its cable type."""
    racks = graph.racks
    coords: dict[str, tuple[float, float, float, str]] = {}
    for devices in (graph.switches.values(), graph.nodes.values()):
        for dev in devices:
            rack = racks.get(dev.rack)
            if rack is None:
                coords[dev.name] = (0.0, 0.0, 1.0, "")
            else:
                coords[dev.name] = (
                    rack.position * RACK_PITCH_M,
                    rack.row * ROW_PITCH_M,
                    dev.u * U_M,
                    rack.name,
                )
    speed_cache: dict[str, tuple[str, bool]] = {}

    def speed_of(device: str) -> tuple[str, bool]:
        hit = speed_cache.get(device)
        if hit is None:
            sw = graph.switches.get(device)
            gen = graph.port_gbps(device, 1)[0]
            hit = (gen, bool(sw is not None and sw.split))
            speed_cache[device] = hit
        return hit

    choice: dict[tuple[str, bool, float], str] = {}
    lengths: dict[float, float] = {}
    catalogue = graph.catalogue
    for link in graph.links:
        xa, ya, za, ra = coords[link.a]
        xb, yb, zb, rb = coords[link.b]
        if ra and ra == rb:
            run = abs(za - zb) + SLACK_IN_RACK_M
        else:
            run = abs(xa - xb) + abs(ya - yb) + (TRAY_HEIGHT_M - za) + (TRAY_HEIGHT_M - zb) + SLACK_BETWEEN_RACKS_M
        length = lengths.get(run)
        if length is None:
            length = lengths[run] = standard_length(run)
        ga, sa = speed_of(link.a)
        gb, sb = speed_of(link.b)
        gen = ga if generation_rank(ga) <= generation_rank(gb) else gb
        key = (gen, sa or sb, length)
        name = choice.get(key)
        if name is None:
            cable = catalogue.cheapest_cable(gen, length, splitter=sa or sb)
            name = cable.name if cable else ""
            choice[key] = name
        link.length_m = length
        link.cable = name
