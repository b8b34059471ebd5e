""" "Can I do X with Y?": answers with the arithmetic and what would make it true."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from designer.builtin_catalogue import DEFAULT_CATALOGUE
from designer.catalogue import Catalogue
from designer.errors import PlanError
from designer.options import PlanOptions, ResolvedOptions, parse_ratio, resolve
from designer.sizing import TreeShape, tree_shape


@dataclass
class FeasibilityAnswer:
    """feasible + the arithmetic as sentences + alternatives that fit the budget."""

    question: str
    feasible: bool
    steps: list[str] = field(default_factory=list)
    alternatives: list[str] = field(default_factory=list)
    needed: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def _describe(shape: TreeShape) -> str:
    parts = [f"{shape.leaves:,} leaf"]
    if shape.spines:
        parts.append(f"{shape.spines:,} spine")
    if shape.cores:
        parts.append(f"{shape.cores:,} core")
    return f"{shape.switches:,} switches ({' + '.join(parts)})"


def _shape(endpoints: int, ports: int, down: int, up: int, model: str) -> TreeShape | None:
    try:
        return tree_shape(endpoints, ports, down, up, None, model)
    except PlanError:
        return None


def can_i(
    *,
    switches: int,
    gpus: int | None = None,
    nodes: int | None = None,
    switch_model: str = "QM9700",
    node_type: str | None = None,
    gpus_per_node: int | None = None,
    hcas_per_node: int | None = None,
    oversubscription: str = "1:1",
    catalogue: Catalogue | None = None,
) -> FeasibilityAnswer:
    """Can `gpus`/`nodes` be fabric'd with `switches` switches of `switch_model`?"""
    cat = catalogue or DEFAULT_CATALOGUE
    size = f"{gpus:,} GPUs" if gpus is not None else f"{nodes or 0:,} nodes"
    question = f"{size} with {switches} × {switch_model} at {oversubscription}?"
    try:
        if switches <= 0:
            raise PlanError(f"switches must be at least 1, got {switches}", element="switches")
        ro = resolve(
            PlanOptions(
                "fat-tree", gpus, nodes, node_type, gpus_per_node, hcas_per_node, switch_model, oversubscription
            ),
            cat,
        )
        down, up = parse_ratio(oversubscription)
    except PlanError as exc:
        return FeasibilityAnswer(question, False, [i.message for i in exc.issues])
    k, model, endpoints = ro.ports, ro.switch.name, ro.endpoints
    steps = [
        f"{ro.gpus:,} GPUs on {ro.node_type.name} ({ro.gpus_per_node} GPUs, {ro.hcas_per_node} "
        f"HCAs each) = {ro.nodes:,} nodes × {ro.hcas_per_node} = {endpoints:,} endpoints",
        f"{switches} × {model} = {switches} × {k} = {switches * k:,} ports",
    ]
    if switches * k < endpoints:
        steps.append(f"{switches * k:,} ports < {endpoints:,} endpoints: not even the host ports fit")
    shape = _shape(endpoints, k, down, up, model)
    needed: dict = {"endpoints": endpoints, "ports_available": switches * k}
    if shape is None:
        steps.append(f"{model} cannot build a fat tree for {endpoints:,} endpoints at {down}:{up}")
        feasible = False
    else:
        label = "non-blocking" if down == up else f"at {down}:{up}"
        steps.append(f"{label} needs {_describe(shape)}")
        steps.extend(shape.steps)
        needed.update(switches=shape.switches, leaves=shape.leaves, spines=shape.spines, cores=shape.cores)
        feasible = shape.switches <= switches
        steps.append(
            f"{shape.switches:,} {'≤' if feasible else '>'} {switches} switches: "
            f"{'it fits' if feasible else 'it does not fit'}"
        )
    alternatives: list[str] = []
    if not feasible:
        alternatives = _alternatives(cat, ro, switches, down, up)
    return FeasibilityAnswer(question, feasible, steps, alternatives, needed)


def _alternatives(cat: Catalogue, ro: ResolvedOptions, budget: int, down: int, up: int) -> list[str]:
    out: list[str] = []
    endpoints, model = ro.endpoints, ro.switch
    for other in sorted(cat.switches.values(), key=lambda m: (not m.modular, m.ports)):
        if other.name == model.name or other.speed != model.speed:
            continue
        shape = _shape(endpoints, other.ports, down, up, other.name)
        if shape and shape.switches <= budget:
            kind = "director-class" if other.modular else "higher-radix"
            out.append(f"{kind} {other.name} ({other.ports} ports): {_describe(shape)} ≤ {budget}")
    if ro.hcas_per_node > 1:
        for d, u in ((down, up), (2, 1), (3, 1)):
            shape = _shape(ro.nodes, model.ports, d, u, model.name)
            if shape is None:
                continue
            fits = "✓" if shape.switches <= budget else "✗"
            out.append(
                f"one HCA per {ro.gpus_per_node}-GPU node ({ro.nodes:,} endpoints) at "
                f"{d}:{u} with {model.name}: {_describe(shape)} {fits}"
            )
    for d, u in ((2, 1), (3, 1), (4, 1)):
        if (d, u) == (down, up):
            continue
        shape = _shape(endpoints, model.ports, d, u, model.name)
        if shape and shape.switches <= budget:
            out.append(f"{d}:{u} oversubscription with {model.name}: {_describe(shape)}")
    return out
