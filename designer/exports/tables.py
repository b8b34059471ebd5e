"""Cabling plan CSV, bill of materials CSV and the full JSON design."""

from __future__ import annotations

import io
import json
from collections import Counter

from designer.cabling import HEADER, cabling_plan
from designer.exports.csvcells import SafeWriter
from designer.graph import FabricGraph
from designer.metrics import compute_metrics
from designer.serialize import graph_to_dict


def render_cabling_csv(graph: FabricGraph) -> str:
    buf = io.StringIO()
    writer = SafeWriter(buf, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(cabling_plan(graph))
    return buf.getvalue()


BOM_HEADER = (
    "category",
    "item",
    "description",
    "quantity",
    "unit_price",
    "total_price",
    "unit_power_w",
    "total_power_w",
)


def bom_rows(graph: FabricGraph) -> list[tuple]:
    """Switches by model, cables by type and length, optics by type, then servers."""
    cat = graph.catalogue
    rows: list[tuple] = []
    for name, qty in sorted(Counter(s.model for s in graph.switches.values()).items()):
        m = cat.switches.get(name)
        price, power = (m.list_price, m.power_w) if m else (0.0, 0.0)
        rows.append(("switch", name, m.description if m else "", qty, price, price * qty, power, power * qty))
    for (name, length), qty in sorted(Counter((lk.cable, lk.length_m) for lk in graph.links).items()):
        c = cat.cables.get(name)
        price, power = (c.price, c.power_w) if c else (0.0, 0.0)
        rows.append(
            (
                "cable",
                name or "unassigned",
                f"{c.kind if c else '?'} {length:g} m",
                qty,
                price,
                price * qty,
                power,
                power * qty,
            )
        )
    optics = compute_metrics(graph)["transceivers_by_type"]
    for name, qty in sorted(optics.items()):
        t = cat.transceivers.get(name)
        price, power = (t.price, t.power_w) if t else (0.0, 0.0)
        rows.append(("transceiver", name, f"{t.speed if t else ''} optic", qty, price, price * qty, power, power * qty))
    for name, qty in sorted(Counter(n.node_type for n in graph.nodes.values()).items()):
        nt = cat.nodes.get(name)
        price, power = (nt.price, nt.power_w) if nt else (0.0, 0.0)
        rows.append(
            (
                "server",
                name,
                f"{nt.gpus if nt else 0} GPUs, {nt.hcas if nt else 0} HCAs",
                qty,
                price,
                price * qty,
                power,
                power * qty,
            )
        )
    return rows


def render_bom_csv(graph: FabricGraph) -> str:
    buf = io.StringIO()
    writer = SafeWriter(buf, lineterminator="\n")
    writer.writerow(BOM_HEADER)
    writer.writerows(bom_rows(graph))
    return buf.getvalue()


def render_json(graph: FabricGraph) -> str:
    return json.dumps(graph_to_dict(graph), separators=(",", ":"))
