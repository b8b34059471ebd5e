"""Side-by-side comparison of parameter sets, and diffs between two graphs (revisions)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from designer.catalogue import Catalogue
from designer.graph import FabricGraph, Link
from designer.options import PlanOptions
from designer.plan import plan

COLUMNS = (
    "label",
    "topology",
    "gpus",
    "endpoints",
    "switches",
    "cables",
    "transceivers",
    "cost",
    "power_w",
    "diameter_switch_hops",
    "bisection_bandwidth_gbps",
    "oversubscription",
    "errors",
)


def compare(
    options: list[PlanOptions | dict],
    catalogue: Catalogue | None = None,
    labels: list[str] | None = None,
) -> list[dict]:
    """One row per option set with the figures people weigh against each other."""
    rows = []
    for i, opts in enumerate(options):
        s = plan(opts, catalogue).summary()
        rows.append(
            {
                "label": labels[i] if labels else f"design {i + 1}",
                "topology": s["topology"],
                "gpus": s["gpus"],
                "endpoints": s["endpoints"],
                "switches": s["switches"]["total"],
                "cables": s["cables"]["total"],
                "transceivers": s["transceivers"],
                "cost": s["cost"],
                "power_w": s["power_w"],
                "diameter_switch_hops": s["diameter_switch_hops"],
                "bisection_bandwidth_gbps": s["bisection_bandwidth_gbps"],
                "oversubscription": s["oversubscription"],
                "errors": s["errors"],
            }
        )
    return rows


def comparison_table(rows: list[dict]) -> str:
    """Plain-text table (for the CLI)."""
    cols = [c for c in COLUMNS if c != "errors"]
    cells = [[str(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


@dataclass
class GraphDiff:
    """What changed from graph a to graph b."""

    added_switches: list[str] = field(default_factory=list)
    removed_switches: list[str] = field(default_factory=list)
    changed_switches: list[dict] = field(default_factory=list)
    added_nodes: list[str] = field(default_factory=list)
    removed_nodes: list[str] = field(default_factory=list)
    added_links: list[dict] = field(default_factory=list)
    removed_links: list[dict] = field(default_factory=list)
    changed_links: list[dict] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not any(asdict(self).values())

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> dict[str, int]:
        return {k: len(v) for k, v in asdict(self).items()}


SWITCH_FIELDS = ("model", "tier", "guid", "rack", "u", "split")
LINK_FIELDS = ("cable", "length_m", "tier")


def _link_dict(lk: Link) -> dict:
    return {
        "a": lk.a,
        "a_port": lk.a_port,
        "b": lk.b,
        "b_port": lk.b_port,
        "tier": lk.tier,
        "cable": lk.cable,
        "length_m": lk.length_m,
    }


def diff_graphs(a: FabricGraph, b: FabricGraph) -> GraphDiff:
    """Switches, nodes and cables added, removed or changed (cables keyed by their two ports)."""
    d = GraphDiff()
    d.added_switches = [n for n in b.switches if n not in a.switches]
    d.removed_switches = [n for n in a.switches if n not in b.switches]
    for name, sa in a.switches.items():
        sb = b.switches.get(name)
        if sb is None:
            continue
        for f in SWITCH_FIELDS:
            old, new = getattr(sa, f), getattr(sb, f)
            if old != new:
                d.changed_switches.append({"name": name, "field": f, "old": old, "new": new})
    d.added_nodes = [n for n in b.nodes if n not in a.nodes]
    d.removed_nodes = [n for n in a.nodes if n not in b.nodes]
    la = {lk.key(): lk for lk in a.links}
    lb = {lk.key(): lk for lk in b.links}
    d.added_links = [_link_dict(lk) for k, lk in lb.items() if k not in la]
    d.removed_links = [_link_dict(lk) for k, lk in la.items() if k not in lb]
    for key, old in la.items():
        new = lb.get(key)
        if new is None:
            continue
        for f in LINK_FIELDS:
            if getattr(old, f) != getattr(new, f):
                d.changed_links.append(
                    {
                        "link": f"{key[0][0]}[{key[0][1]}]-{key[1][0]}[{key[1][1]}]",
                        "field": f,
                        "old": getattr(old, f),
                        "new": getattr(new, f),
                    }
                )
    return d
