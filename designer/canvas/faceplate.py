"""Switch level: one switch's ports as a faceplate (cages in columns) with the peer on every port.

Peers in a higher tier are drawn above the faceplate, the rest (lower tiers, hosts) below it, in
rows as wide as the faceplate so their names stay readable when the level is fitted.
"""

from __future__ import annotations

from designer.canvas.elements import DX, DY, HOST, grid, switch_node
from designer.canvas.groups import CanvasIndex, tier_rank

PORT_DX = 40.0
PORT_DY = 40.0
PEER_DY = 62.0  # between rows of peers


def faceplate(idx: CanvasIndex, name: str) -> dict:
    """Port nodes by cage, one edge per connected port, the peers and a per-port table."""
    graph = idx.graph
    sw = graph.switches[name]
    model = graph.catalogue.switches.get(sw.model)
    total = idx.total(name)
    split = sw.split if model and sw.split in model.split_modes else None
    per_cage = max(1, total // max(1, model.cages)) if model else 2
    rank = tier_rank(sw.tier)
    ports: list[dict] = []
    nodes: list[dict] = []
    edges: list[dict] = []
    peers: dict[str, list[int]] = {}
    by_port = {}
    for lk in graph.links:
        if lk.a == name:
            by_port[lk.a_port] = (lk, lk.b, lk.b_port)
        elif lk.b == name:
            by_port[lk.b_port] = (lk, lk.a, lk.a_port)
    cols = -(-total // per_cage)
    width = cols * PORT_DX
    for p in range(1, total + 1):
        cage = model.cage_of(p, split) if model else (p - 1) // per_cage
        row = (p - 1) % per_cage
        x, y = cage * PORT_DX, row * PORT_DY
        hit = by_port.get(p)
        row_data = {
            "port": p,
            "cage": cage + 1,
            "peer": "",
            "peer_port": None,
            "cable": "",
            "length_m": None,
            "tier": "",
            "free": hit is None,
        }
        if hit:
            lk, peer, peer_port = hit
            row_data.update(peer=peer, peer_port=peer_port, cable=lk.cable, length_m=lk.length_m, tier=lk.tier)
            peers.setdefault(peer, []).append(p)
            edges.append(
                {
                    "id": f"port:{name}:{p}--{peer}",
                    "source": f"port:{name}:{p}",
                    "target": peer,
                    "count": 1,
                    "tier": lk.tier,
                    "cable": lk.cable,
                    "links": [[lk.a, lk.a_port, lk.b, lk.b_port, lk.cable, lk.length_m]],
                }
            )
        ports.append(row_data)
        nodes.append(
            {
                "id": f"port:{name}:{p}",
                "label": str(p),
                "kind": "port",
                "tier": sw.tier,
                "x": round(x, 1),
                "y": round(y, 1),
                "parent": name,
                "ports_used": 0 if hit is None else 1,
                "ports_total": 1,
                "data": {**row_data, "switch": name},
            }
        )
    node = switch_node(idx, name, width / 2, (per_cage - 1) * PORT_DY / 2, None)
    nodes.insert(0, node)
    above = [p for p in peers if p in graph.switches and tier_rank(graph.switches[p].tier) < rank]
    below = [p for p in peers if p not in above]
    per_row = max(4, int(width // DX))
    above_rows = -(-len(above) // per_row)
    for names, y0 in ((above, -DY - (above_rows - 1) * PEER_DY), (below, (per_cage - 1) * PORT_DY + DY)):
        cells = grid(len(names), per_row)
        cols = max((c for c, _ in cells), default=0) + 1
        step = max(DX, width / cols)
        start = (width - step * (cols - 1)) / 2
        for peer, (c, r) in zip(names, cells, strict=True):
            x, y = start + c * step, y0 + r * PEER_DY
            if peer in graph.switches:
                nodes.append(switch_node(idx, peer, x, y, None))
            else:
                n = graph.nodes[peer]
                nodes.append(
                    {
                        "id": peer,
                        "label": peer,
                        "kind": "node-group",
                        "tier": HOST,
                        "x": round(x, 1),
                        "y": round(y, 1),
                        "ports_used": idx.used.get(peer, 0),
                        "ports_total": n.hcas,
                        "data": {"hosts": 1, "node_type": n.node_type, "role": n.role, "rack": n.rack},
                    }
                )
    return {"nodes": nodes, "edges": edges, "ports": ports}
