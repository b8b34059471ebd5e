"""PlanOptions: the parameters of a design, mirroring `manage.py design plan` flags."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace

from designer.catalogue import Catalogue, NodeType, SwitchModel
from designer.errors import Issue, PlanError, UnknownItemError

TOPOLOGIES = ("fat-tree", "rail-optimized", "torus", "dragonfly-plus")
TOPOLOGY_ALIASES = {
    "fat_tree": "fat-tree",
    "fattree": "fat-tree",
    "rail-optimised": "rail-optimized",
    "rail_optimized": "rail-optimized",
    "rail": "rail-optimized",
    "superpod": "rail-optimized",
    "dragonfly+": "dragonfly-plus",
    "dragonfly_plus": "dragonfly-plus",
}


@dataclass
class PlanOptions:
    """What to build. `gpus` or `nodes` sizes it; the rest have field-sensible defaults."""

    topology: str = "fat-tree"
    gpus: int | None = None
    nodes: int | None = None
    node_type: str | None = None  # None: "generic" when gpus/hcas_per_node are given, else DGX_DEFAULT
    gpus_per_node: int | None = None  # only for node_type "generic"
    hcas_per_node: int | None = None  # only for node_type "generic"
    switch: str = "QM9700"
    oversubscription: str = "1:1"  # "down:up" at the leaf
    levels: str | int = "auto"  # auto | 1 | 2 | 3 (trees)
    manager_slot: bool = False  # rail-optimised: one slot per SU for the fabric manager
    dims: str | None = None  # torus "AxB" or "AxBxC"
    hosts_per_switch: int | None = None  # torus and dragonfly+ leaves
    su_nodes: int | None = None  # rail-optimised: node slots per scalable unit
    groups: int | None = None  # dragonfly+: force the group count
    split: str | None = None  # run every switch in this split mode, e.g. "NDR200x2"

    @classmethod
    def from_dict(cls, data: dict) -> PlanOptions:
        """Build from JSON/CLI data; unknown keys are an error that names them."""
        names = {f.name for f in fields(cls)}
        data = {k.replace("-", "_"): v for k, v in data.items() if v is not None}
        unknown = sorted(set(data) - names)
        if unknown:
            raise PlanError(f"unknown option(s) {', '.join(unknown)}: known are {', '.join(sorted(names))}")
        return cls(**data)

    def as_dict(self) -> dict:
        return asdict(self)


#: The node type of a design that names none and gives no per-node counts.
DGX_DEFAULT = "DGX-H100"
#: The node type whose GPUs and HCAs per node are set by gpus_per_node / hcas_per_node.
GENERIC_NODE = "generic"


def node_type_name(options: PlanOptions) -> str:
    """The node type asked for: named, else implied.

    gpus_per_node or hcas_per_node without a node type describe a node of one's own, so they
    imply the generic node (documented in docs/api.md); with neither, the default DGX.
    """
    if options.node_type:
        return options.node_type
    if options.gpus_per_node is not None or options.hcas_per_node is not None:
        return GENERIC_NODE
    return DGX_DEFAULT


@dataclass(frozen=True)
class ResolvedOptions:
    """PlanOptions checked against the catalogue, with every derived size filled in.

    `options` carries the catalogue's spelling of the switch and node type and the implied node
    type, so a saved design names its models as the catalogue does.
    """

    topology: str
    node_type: NodeType
    switch: SwitchModel
    nodes: int
    gpus_per_node: int
    hcas_per_node: int
    down: int  # oversubscription down part
    up: int  # oversubscription up part
    levels: int | None  # None = auto
    ports: int  # switch radix in the chosen split mode
    port_gbps: int
    options: PlanOptions
    warnings: tuple[Issue, ...] = ()

    @property
    def endpoints(self) -> int:
        return self.nodes * self.hcas_per_node

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


def parse_ratio(text: str | None) -> tuple[int, int]:
    """ "2:1" → (2, 1); raises PlanError with the accepted form."""
    if text in (None, ""):
        return 1, 1
    try:
        d_text, u_text = str(text).split(":")
        down, up = int(d_text), int(u_text)
    except ValueError:
        raise PlanError(
            f"oversubscription {text!r} is not of the form D:U (e.g. 1:1, 2:1, 3:1)",
            element="oversubscription",
        ) from None
    if down <= 0 or up <= 0:
        raise PlanError(
            f"oversubscription {text!r} needs positive numbers (e.g. 1:1, 2:1)",
            element="oversubscription",
        )
    if up > down:
        raise PlanError(
            f"oversubscription {text!r} has more up than down links: a leaf gains nothing "
            f"from it; use 1:1 (non-blocking) or D:U with D > U",
            element="oversubscription",
        )
    g = math.gcd(down, up)
    return down // g, up // g


def parse_dims(text: str | None) -> tuple[int, ...] | None:
    """ "4x4x4" → (4, 4, 4); 2 or 3 dimensions of at least 1."""
    if not text:
        return None
    try:
        dims = tuple(int(x) for x in str(text).lower().replace("*", "x").split("x"))
    except ValueError:
        raise PlanError(f"dims {text!r} is not of the form AxB or AxBxC (e.g. 4x4x4)", element="dims") from None
    if len(dims) not in (2, 3) or min(dims) < 1:
        raise PlanError(
            f"dims {text!r} must have 2 or 3 sizes of at least 1 (e.g. 8x8 or 4x4x4)",
            element="dims",
        )
    return dims


#: Planning limits that keep every request bounded in time and memory (a subnet has 49,151
#: unicast LIDs; these leave room for multi-subnet what-if sizing).
MAX_ENDPOINTS = 131_072
MAX_SWITCHES = 32_768


@dataclass(frozen=True)
class Budget:
    """How much one plan may build: its endpoints (HCA ports) and, for a torus, its switches. A
    web request plans within :data:`REQUEST_BUDGET`; the CLI (the operator's own machine) up to
    the design limits (:data:`MAX_ENDPOINTS`, :data:`MAX_SWITCHES`)."""

    endpoints: int
    switches: int


#: One request's plan: a 65,536-endpoint fat tree plans in about 2 s on a 2-core machine, a
#: 16x16x32 torus (8,192 switches) in about 2 s; the 32x32x32 torus of 32,768 switches took 15 s
#: (docs/reliability.md, the second hardening round).
REQUEST_BUDGET = Budget(endpoints=65_536, switches=8_192)


def _positive(name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f"{name} must be a whole number, got {value!r}", element=name)
    if value <= 0:
        raise PlanError(f"{name} must be at least 1, got {value}", element=name)


def _within(budget: Budget, endpoints: int, switches: int, fail: Callable[[str, str, str], None]) -> None:
    """Refuse, naming the limit, a plan bigger than one request may build."""
    where = "plan it with `manage.py design plan` (the CLI plans up to the design limits)"
    if endpoints > budget.endpoints:
        message = f"{endpoints:,} endpoints is more than one request plans (at most {budget.endpoints:,}): {where}"
        fail("gpus", message, "over-budget")
    if switches > budget.switches:
        message = f"{switches:,} switches is more than one request plans (at most {budget.switches:,}): {where}"
        fail("dims", message, "over-budget")


def resolve(options: PlanOptions, catalogue: Catalogue, budget: Budget | None = None) -> ResolvedOptions:
    """Check options against the catalogue (and ``budget``); every problem is collected into
    one PlanError."""
    issues: list[Issue] = []
    warnings: list[Issue] = []

    def fail(element: str, message: str, code: str = "invalid-option") -> None:
        issues.append(Issue("error", code, element, message))

    topology = TOPOLOGY_ALIASES.get(str(options.topology).lower(), str(options.topology).lower())
    if topology not in TOPOLOGIES:
        fail("topology", f"unknown topology {options.topology!r}: choose {', '.join(TOPOLOGIES)}")
    for name in ("gpus", "nodes", "gpus_per_node", "hcas_per_node", "hosts_per_switch", "su_nodes", "groups"):
        try:
            _positive(name, getattr(options, name))
        except PlanError as exc:
            issues.extend(exc.issues)
    try:
        switch = catalogue.switch(options.switch)
    except UnknownItemError as exc:
        fail("switch", exc.message, "unknown-model")
        switch = None
    try:
        node_type = catalogue.node_type(node_type_name(options))
    except UnknownItemError as exc:
        fail("node_type", exc.message, "unknown-model")
        node_type = None
    try:
        down, up = parse_ratio(options.oversubscription)
    except PlanError as exc:
        issues.extend(exc.issues)
        down, up = 1, 1
    levels: int | None = None
    if str(options.levels).lower() != "auto":
        try:
            levels = int(options.levels)
        except (TypeError, ValueError):
            levels = -1
        if levels not in (1, 2, 3):
            fail("levels", f"levels {options.levels!r} must be auto, 1, 2 or 3")
    try:
        parse_dims(options.dims)
    except PlanError as exc:
        issues.extend(exc.issues)
    if options.gpus is None and options.nodes is None:
        fail("gpus", "give the size: gpus or nodes")
    if options.gpus is not None and options.nodes is not None:
        fail("gpus", "give gpus or nodes, not both")

    if issues:  # sizes below may be unusable (e.g. not numbers): report what we have
        raise PlanError(issues)
    gpn = hpn = 0
    if node_type is not None:
        gpn, hpn = node_type.gpus, node_type.hcas
        if node_type.name == GENERIC_NODE:
            gpn = options.gpus_per_node if options.gpus_per_node is not None else gpn
            hpn = options.hcas_per_node if options.hcas_per_node is not None else gpn or hpn
            if not options.node_type:
                warnings.append(
                    Issue(
                        "warning",
                        "implied-node-type",
                        "node_type",
                        f"gpus_per_node/hcas_per_node without node_type: planned with node_type {GENERIC_NODE} "
                        f"({gpn} GPUs, {hpn} HCAs per node)",
                    )
                )
        else:
            for name, have in (("gpus_per_node", gpn), ("hcas_per_node", hpn)):
                given = getattr(options, name)
                if given is not None and given != have:
                    fail(name, f"{node_type.name} has {have} {name.replace('_', ' ')}; {given} needs node_type generic")
        if hpn <= 0:
            fail("hcas_per_node", f"{node_type.name} has no HCAs to connect")

    ports = gbps = 0
    if switch is not None:
        ports, gbps = switch.ports, switch.port_gbps
        if options.split:
            if options.split not in switch.split_modes:
                modes = ", ".join(switch.split_modes) or "none"
                fail("split", f"{switch.name} has no split mode {options.split!r}: modes {modes}")
            else:
                ports, gbps = switch.split_modes[options.split]

    nodes = 0
    if options.nodes is not None and options.nodes > 0:
        nodes = options.nodes
    elif options.gpus is not None and options.gpus > 0 and node_type is not None:
        if gpn <= 0:
            fail("gpus", f"{node_type.name} has no GPUs: size the design with nodes instead")
        else:
            nodes = -(-options.gpus // gpn)
            if nodes * gpn != options.gpus:
                warnings.append(
                    Issue(
                        "warning",
                        "rounded-up",
                        "gpus",
                        f"{options.gpus:,} GPUs need {nodes:,} nodes of {gpn} GPUs ({nodes * gpn:,} GPUs)",
                    )
                )
    if nodes * max(hpn, 1) > MAX_ENDPOINTS:
        fail(
            "gpus",
            f"{nodes * hpn:,} endpoints requested: a design has at most "
            f"{MAX_ENDPOINTS:,} endpoints (one subnet has 49,151 unicast LIDs)",
        )
    dims = parse_dims(options.dims) if options.dims else None
    if dims is not None and math.prod(dims) > MAX_SWITCHES:
        fail("dims", f"{options.dims} is {math.prod(dims):,} switches: at most {MAX_SWITCHES:,}")
    if budget is not None:
        _within(budget, nodes * max(hpn, 1), math.prod(dims) if dims else 0, fail)
    if issues:
        raise PlanError(issues)
    assert switch is not None and node_type is not None
    options = replace(options, switch=switch.name, node_type=node_type.name)
    if node_type.hca_gbps and gbps and node_type.hca_speed != switch.speed:
        warnings.append(
            Issue(
                "warning",
                "speed-mismatch",
                "node_type",
                f"{node_type.name} HCAs are {node_type.hca_speed} {node_type.hca_gbps}G and "
                f"{switch.name} ports are {switch.speed} {gbps}G: links train at the slower speed; "
                f"choose a {node_type.hca_speed} switch or a matching split mode",
            )
        )
    return ResolvedOptions(
        topology,
        node_type,
        switch,
        nodes,
        gpn,
        hpn,
        down,
        up,
        levels,
        ports,
        gbps,
        options,
        tuple(warnings),
    )
