"""Full JSON form of a graph (round-trippable), including the catalogue items it uses."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from designer.catalogue import CableType, Catalogue, NodeType, SwitchModel, TransceiverType
from designer.errors import ParseError
from designer.graph import FabricGraph, Link, Node, Rack, Switch

FORMAT_VERSION = 1


def _hex(value: int) -> str:
    return f"0x{value:016x}"


def graph_to_dict(graph: FabricGraph) -> dict:
    """Plain JSON-able dict; links are compact lists [a, a_port, b, b_port, tier, cable, m]."""
    cat = graph.catalogue
    models = sorted({sw.model for sw in graph.switches.values()})
    types = sorted({n.node_type for n in graph.nodes.values()})
    cables = sorted({lk.cable for lk in graph.links if lk.cable})
    optics = sorted({cat.cables[c].transceiver for c in cables if c in cat.cables} - {""})
    switches = []
    for sw in graph.switches.values():
        row = asdict(sw)
        row["guid"] = _hex(sw.guid)
        row["coords"] = list(sw.coords)
        switches.append(row)
    nodes = []
    for n in graph.nodes.values():
        row = asdict(n)
        row["ca_guids"] = [_hex(g) for g in n.ca_guids]
        row["port_guids"] = [_hex(g) for g in n.port_guids]
        for key in ("ca_ports", "rails", "hca_names"):
            row[key] = list(row[key])
        nodes.append(row)
    return {
        "format": "ib-fabric-designer",
        "version": FORMAT_VERSION,
        "topology": graph.topology,
        "meta": graph.meta,
        "catalogue": {
            "switches": [_model_dict(cat.switches[m]) for m in models if m in cat.switches],
            "nodes": [asdict(cat.nodes[t]) for t in types if t in cat.nodes],
            "cables": [asdict(cat.cables[c]) for c in cables if c in cat.cables],
            "transceivers": [asdict(cat.transceivers[o]) for o in optics if o in cat.transceivers],
        },
        "racks": [asdict(r) for r in graph.racks.values()],
        "switches": switches,
        "nodes": nodes,
        "links": [[lk.a, lk.a_port, lk.b, lk.b_port, lk.tier, lk.cable, lk.length_m] for lk in graph.links],
    }


def _model_dict(model: SwitchModel) -> dict:
    row = asdict(model)
    row["split_modes"] = {k: list(v) for k, v in model.split_modes.items()}
    return row


def _known(cls: type, row: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in row.items() if k in names}


def graph_from_dict(data: dict, catalogue: Catalogue) -> FabricGraph:
    """Rebuild a graph; catalogue items embedded in the data fill gaps in `catalogue`."""
    if not isinstance(data, dict) or data.get("format") != "ib-fabric-designer":
        raise ParseError("not an ib-fabric-designer JSON document (missing 'format')")
    try:
        cat = catalogue.copy()
        embedded = data.get("catalogue", {})
        for row in embedded.get("switches", []):
            if row["name"] not in cat.switches:
                row = dict(row, split_modes={k: tuple(v) for k, v in row["split_modes"].items()})
                cat.switches[row["name"]] = SwitchModel(**_known(SwitchModel, row))
        tables: tuple[tuple[str, type, dict[str, Any]], ...] = (
            ("nodes", NodeType, cat.nodes),
            ("cables", CableType, cat.cables),
            ("transceivers", TransceiverType, cat.transceivers),
        )
        for key, cls, table in tables:
            for row in embedded.get(key, []):
                table.setdefault(row["name"], cls(**_known(cls, row)))
        graph = FabricGraph(cat, data.get("topology", "custom"), meta=dict(data.get("meta", {})))
        for row in data.get("racks", []):
            graph.racks[row["name"]] = Rack(**_known(Rack, row))
        for row in data["switches"]:
            row = dict(row, guid=int(row["guid"], 16), coords=tuple(row.get("coords", ())))
            graph.switches[row["name"]] = Switch(**_known(Switch, row))
        for row in data["nodes"]:
            row = dict(row)
            row["ca_guids"] = tuple(int(g, 16) for g in row["ca_guids"])
            row["port_guids"] = tuple(int(g, 16) for g in row["port_guids"])
            for key in ("ca_ports", "rails", "hca_names"):
                row[key] = tuple(row.get(key, ()))
            graph.nodes[row["name"]] = Node(**_known(Node, row))
        graph.links = [
            Link(a, int(ap), b, int(bp), tier, cable, float(length))
            for a, ap, b, bp, tier, cable, length in data["links"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise ParseError(f"malformed design JSON: {type(exc).__name__}: {exc}") from None
    return graph
