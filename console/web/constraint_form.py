"""The reservation form's constraint controls, derived from the registered constraint types.

The template renders what this returns, so a constraint type registered in
:mod:`scheduling.placement.registry` gets its form control without a template edit: ``select``
controls sit beside the priority class (their options come from the pool, filled by the page's
script), checkboxes and inputs on the row below.
"""

from __future__ import annotations

from typing import Any

from scheduling.placement.registry import Param, params

#: One plain-language line per built-in parameter for the form's "Advanced options" (a plug-in's
#: parameter shows its own ``help``).
HELP = {
    "gpu_model": "Only nodes with this GPU model (any: whatever the pool has).",
    "same_leaf": "All nodes under one leaf switch: the shortest paths between them, fewer spots that fit.",
    "max_switch_hops": "Upper bound on switches a message crosses between two of your nodes (lower: closer together).",
    "rail_aligned": "GPU n of every node on the same rail switch: what NCCL's ring and tree traffic likes best.",
    "sharp": "NVIDIA SHARP: reductions computed in the switches, on an aggregation tree held for you (few per switch).",
}


def _control(param: Param) -> dict[str, Any]:
    widget = param.widget or ("checkbox" if param.kind is bool else "number" if param.kind is int else "text")
    return {
        "name": param.name,
        "label": param.label,
        "widget": widget,
        "testid": "res-" + param.flag.removeprefix("--"),
        "min": param.min_value,
        "max": param.max_value,
        "maxlength": param.max_length,
        "help": HELP.get(param.name, param.help),
    }


def constraint_controls() -> dict[str, list[dict[str, Any]]]:
    """The controls grouped by where the form shows them: ``selects``, ``checkboxes``, ``inputs``."""
    controls = [_control(p) for p in params()]
    return {
        "selects": [c for c in controls if c["widget"] == "select"],
        "checkboxes": [c for c in controls if c["widget"] == "checkbox"],
        "inputs": [c for c in controls if c["widget"] not in {"select", "checkbox"}],
    }
