"""plan(): options → graph + validation + metrics, the single entry point of every front end.

Bad input never raises: it comes back as `PlanResult.errors` (and `summary()["errors"]`), each
naming the option or element, what is wrong and what would fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from designer.builtin_catalogue import DEFAULT_CATALOGUE
from designer.catalogue import Catalogue
from designer.errors import DesignerError, Issue, PlanError
from designer.generators import generate
from designer.graph import FabricGraph
from designer.metrics import compute_metrics
from designer.options import Budget, PlanOptions, resolve
from designer.validation import IbsimLimits, ValidationReport, validate

__all__ = ["PlanOptions", "PlanResult", "plan", "evaluate"]

TIER_KEYS = {
    "fat-tree": (("leaf", "spine", "core"), ("node_leaf", "leaf_spine", "spine_core")),
    "rail-optimized": (("leaf", "spine", "core"), ("node_leaf", "leaf_spine", "spine_core")),
    "torus": (("torus",), ("node_switch", "torus_x", "torus_y", "torus_z")),
    "dragonfly-plus": (("leaf", "spine"), ("node_leaf", "leaf_spine", "global")),
}


@dataclass
class PlanResult:
    """A planned design: its graph (None when impossible), findings and metrics."""

    options: PlanOptions
    graph: FabricGraph | None
    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    topology: str = ""

    @property
    def ok(self) -> bool:
        return self.graph is not None and not self.errors

    def summary(self) -> dict:
        """The JSON object `design plan --json` prints (stable keys, see the issue)."""
        g = self.graph
        m = self.metrics
        topo = self.topology or str(self.options.topology)
        sw_keys, cable_keys = TIER_KEYS.get(topo, ((), ()))
        switches = {k: 0 for k in sw_keys}
        cables = {k: 0 for k in cable_keys}
        switches.update(m.get("switches", {}))
        cables.update(m.get("cables", {}))
        switches.setdefault("total", 0)
        cables.setdefault("total", 0)
        switches["total"] = switches.pop("total")
        cables["total"] = cables.pop("total")
        return {
            "topology": topo,
            "nodes": sum(1 for n in g.nodes.values() if n.role == "compute") if g else 0,
            "gpus": g.gpus() if g else 0,
            "endpoints": g.endpoints() if g else 0,
            "switches": switches,
            "cables": cables,
            "transceivers": m.get("transceivers", 0),
            "oversubscription": m.get("oversubscription"),
            "bisection_bandwidth_gbps": m.get("bisection_bandwidth_gbps", 0),
            "diameter_switch_hops": m.get("diameter_switch_hops"),
            "power_w": m.get("power_w", 0),
            "cost": m.get("cost", 0),
            "warnings": [i.message for i in self.warnings],
            "errors": [i.message for i in self.errors],
            "levels": g.meta.get("levels") if g else None,
            "cables_by_type": m.get("cables_by_type", {}),
            "transceivers_by_type": m.get("transceivers_by_type", {}),
            "port_utilisation": m.get("port_utilisation", {}),
            "max_latency_ns": m.get("max_latency_ns"),
            "compute_power_w": m.get("compute_power_w", 0),
            "compute_cost": m.get("compute_cost", 0),
            "racks": len(g.racks) if g else 0,
            "steps": g.meta.get("steps", []) if g else [],
            "issues": [i.as_dict() for i in self.errors + self.warnings],
        }


def evaluate(graph: FabricGraph, limits: IbsimLimits | None = None) -> tuple[ValidationReport, dict]:
    """Re-validate and re-measure a (possibly edited) graph."""
    return validate(graph, limits), compute_metrics(graph)


def plan(
    options: PlanOptions | dict,
    catalogue: Catalogue | None = None,
    *,
    limits: IbsimLimits | None = None,
    budget: Budget | None = None,
) -> PlanResult:
    """Generate, validate and measure a design (within ``budget`` when given: a web request's);
    never raises for bad input."""
    catalogue = catalogue or DEFAULT_CATALOGUE
    try:
        if isinstance(options, dict):
            options = PlanOptions.from_dict(options)
    except (PlanError, TypeError) as exc:
        issues = exc.issues if isinstance(exc, PlanError) else [Issue("error", "invalid-option", "options", str(exc))]
        return PlanResult(PlanOptions(), None, list(issues))
    try:
        ro = resolve(options, catalogue, budget)
        graph = generate(ro, catalogue)
    except PlanError as exc:
        return PlanResult(options, None, list(exc.issues), topology=str(options.topology))
    except DesignerError as exc:  # pragma: no cover - defensive: every path raises PlanError
        return PlanResult(options, None, [Issue("error", "invalid-option", "options", str(exc))])
    report, metrics = evaluate(graph, limits)
    notes = [Issue(**d) for d in graph.meta.get("notes", [])]
    return PlanResult(
        options,
        graph,
        list(report.errors),
        list(ro.warnings) + notes + list(report.warnings),
        metrics,
        ro.topology,
    )
