"""The registry of constraint types: the public parameters that build a request's constraints.

Each :class:`ConstraintType` declares its parameters (:class:`Param`: a JSON key of the
reservation request, a form field and a CLI flag, with its type, default and bounds) and how
their values become constraint objects (:mod:`.types`). The services build a request's
constraints with :func:`build_constraints`, the API serializer, the reservation form and the CLI
derive their fields from :func:`params`, so adding a constraint is one class (its node filter or
spread limit), one :func:`register` call and its tests, with no change to the engine, the
services or the serializer.

Registration order is the order of the fields and of the constraints built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .constraints import GpuModel, MaxSwitchHops, RailAligned, SameLeaf
from .sharp import Sharp
from .types import Constraint


class ConstraintError(ValueError):
    """A parameter value no constraint can be built from; names the parameter."""

    def __init__(self, param: str, message: str, code: str) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


@dataclass(frozen=True, slots=True)
class Param:
    """One public parameter: ``kind`` is ``bool``, ``int`` or ``str``; ``default`` means "not
    asked"; ``nullable`` ints may be omitted (``None``). ``cli_flag`` defaults to
    ``--name-with-dashes``; ``widget`` names the form control (``checkbox``, ``number``,
    ``select``, ``text``)."""

    name: str
    kind: type
    label: str
    default: Any = None
    nullable: bool = False
    min_value: int | None = None
    max_value: int | None = None
    max_length: int | None = None
    cli_flag: str | None = None
    widget: str = ""
    help: str = ""

    @property
    def flag(self) -> str:
        """The CLI flag of the parameter."""
        return self.cli_flag or "--" + self.name.replace("_", "-")


@dataclass(frozen=True, slots=True)
class ConstraintType:
    """A named constraint type: its parameters and the builder of its constraint objects (an
    empty tuple when the values do not ask for it)."""

    name: str
    params: tuple[Param, ...]
    build: Callable[[Mapping[str, Any]], tuple[Constraint, ...]]


_TYPES: dict[str, ConstraintType] = {}


def register(ctype: ConstraintType) -> ConstraintType:
    """Add a constraint type; its parameter names must be new."""
    if ctype.name in _TYPES:
        raise ValueError(f"constraint type {ctype.name!r} is already registered")
    taken = {p.name for t in _TYPES.values() for p in t.params}
    clash = taken & {p.name for p in ctype.params}
    if clash:
        raise ValueError(f"parameter(s) {', '.join(sorted(clash))} already belong to another constraint type")
    _TYPES[ctype.name] = ctype
    return ctype


def unregister(name: str) -> None:
    """Remove a constraint type (tests undo their registrations with it)."""
    del _TYPES[name]


def constraint_types() -> tuple[ConstraintType, ...]:
    """The registered types, in registration order."""
    return tuple(_TYPES.values())


def params() -> tuple[Param, ...]:
    """Every registered parameter, in registration order."""
    return tuple(p for t in _TYPES.values() for p in t.params)


def build_constraints(values: Mapping[str, Any]) -> tuple[Constraint, ...]:
    """The constraints ``values`` (parameter name → value; absent = default) ask for.

    Raises :class:`ConstraintError` naming the parameter of a value that cannot be used.
    """
    out: list[Constraint] = []
    for ctype in _TYPES.values():
        own = {p.name: values.get(p.name, p.default) for p in ctype.params}
        out.extend(ctype.build(own))
    return tuple(out)


def _max_switch_hops(values: Mapping[str, Any]) -> tuple[Constraint, ...]:
    hops = values["max_switch_hops"]
    if hops is None:
        return ()
    if hops < 0:
        raise ConstraintError("max_switch_hops", "max_switch_hops cannot be negative", "< 0")
    return (MaxSwitchHops(hops),)


register(
    ConstraintType(
        "gpu_model",
        (Param("gpu_model", str, "GPU model", default="", max_length=40, widget="select"),),
        lambda v: (GpuModel(v["gpu_model"]),) if v["gpu_model"] else (),
    )
)
register(
    ConstraintType(
        "same_leaf",
        (Param("same_leaf", bool, "Same leaf", default=False, widget="checkbox"),),
        lambda v: (SameLeaf(),) if v["same_leaf"] else (),
    )
)
register(
    ConstraintType(
        "max_switch_hops",
        (
            Param(
                "max_switch_hops",
                int,
                "Max switch hops",
                nullable=True,
                min_value=0,
                max_value=8,
                cli_flag="--max-hops",
                widget="number",
            ),
        ),
        _max_switch_hops,
    )
)
register(
    ConstraintType(
        "rail_aligned",
        (Param("rail_aligned", bool, "Rail-aligned", default=False, widget="checkbox"),),
        lambda v: (RailAligned(),) if v["rail_aligned"] else (),
    )
)
register(
    ConstraintType(
        "sharp",
        (
            Param(
                "sharp",
                bool,
                "SHARP",
                default=False,
                widget="checkbox",
                help="in-network reduction: an aggregation tree on the switches up to the job's lowest common switch",
            ),
        ),
        lambda v: (Sharp(),) if v["sharp"] else (),
    )
)
