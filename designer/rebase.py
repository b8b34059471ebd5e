"""A design for a second site: the same fabric under other names and GUIDs.

Generated designs number their GUIDs from fixed bases (:func:`designer.graph.planned_ca_guid`), so
two fabrics planned from options share GUIDs and names: fine for two designs, wrong for two
subnets one console manages side by side (a GUID names one port in the world, and a pool spanning
both fabrics would hold two ``node-001``). :func:`rebase` shifts every GUID by an offset and
prefixes every switch and node name, on the saved JSON form (``designer.serialize``), so the
result is an ordinary edited graph to save as a revision.

Pure: no database.
"""

from __future__ import annotations

import copy
from typing import Any

from designer.errors import PlanError

#: One step of GUID offset: bit 36, above every planned index (switches and CAs keep apart:
#: 0x0002c902… and 0x0002c903… become 0x0002c912… and 0x0002c913… at step 1).
GUID_STEP = 1 << 36


def _hex(value: int) -> str:
    return f"0x{value:016x}"


def rebase(data: dict[str, Any], *, step: int, prefix: str) -> dict[str, Any]:
    """A copy of the design JSON ``data`` with every GUID moved ``step`` × :data:`GUID_STEP` up
    and every switch and node name prefixed with ``prefix`` (links follow)."""
    if not 0 < step < 16:
        raise PlanError(f"GUID step {step} out of range: 1..15")
    if not prefix:
        raise PlanError("a rebased design needs a name prefix")
    out = copy.deepcopy(data)
    shift = step * GUID_STEP
    renamed: dict[str, str] = {}
    for switch in out["switches"]:
        renamed[switch["name"]] = prefix + switch["name"]
        switch["name"] = renamed[switch["name"]]
        switch["guid"] = _hex(int(switch["guid"], 16) + shift)
    for node in out["nodes"]:
        renamed[node["name"]] = prefix + node["name"]
        node["name"] = renamed[node["name"]]
        node["ca_guids"] = [_hex(int(g, 16) + shift) for g in node["ca_guids"]]
        node["port_guids"] = [_hex(int(g, 16) + shift) for g in node["port_guids"]]
    out["links"] = [[renamed.get(a, a), ap, renamed.get(b, b), bp, *rest] for a, ap, b, bp, *rest in out["links"]]
    return out
