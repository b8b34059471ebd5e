"""The ufm driver's SHARP check: UFM's SHARP reservations against the partitions that hold trees.

NVIDIA's UFM Enterprise REST API guide (6.16-6.24, "NVIDIA SHARP REST API"): with
``reservation_auto_by_pkeys`` (SHARP's default) the SHARP Aggregation Manager creates, updates and
deletes one SHARP reservation per P_Key the SM defines, with that P_Key's GUIDs, and

``GET /ufmRest/app/sharp/allocate_resources`` answers every reservation as
``{"<app_id>": {"pkey": "0x12", "guids": ["0x248a0703008a850a", …]}, …}``.

So the console binds a tenant's hosts to SHARP with the P_Key it already sets and only *reads*
SHARP back: the create/update/delete calls are being withdrawn (April 2026) and not used. A
reservation is matched by its ``pkey``, never by ``app_id`` (SHARP names it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from console.fabric.drivers.base import DriverError, DriverUnavailable

ALLOCATE_RESOURCES = "/ufmRest/app/sharp/allocate_resources"


class Requester(Protocol):
    """What this module needs of :class:`console.fabric.drivers.ufm.UfmClient`."""

    def request(self, method: str, path: str, body: Any = None) -> Any: ...


def _guid(text: Any) -> str:
    return str(text).lower().removeprefix("0x")


def live_sharp(raw: Mapping[str, Any]) -> dict[int, set[str]]:
    """``allocate_resources``' answer as P_Key → GUIDs (16 hex digits, no ``0x``, as the driver keeps them)."""
    out: dict[int, set[str]] = {}
    for value in raw.values():
        pkey = int(str(value.get("pkey", "0")), 16) & 0x7FFF
        out.setdefault(pkey, set()).update(_guid(g) for g in value.get("guids", []))
    return out


def sharp_mismatches(client: Requester, want: Mapping[int, set[str]]) -> list[str]:
    """Every P_Key of ``want`` without a SHARP reservation listing exactly its GUIDs (empty = verified)."""
    if not want:
        return []
    try:
        live = live_sharp(client.request("GET", ALLOCATE_RESOURCES) or {})
    except DriverUnavailable:
        raise  # UFM itself unreachable: the push fails like any other UFM call, nothing to judge
    except DriverError as exc:  # UFM answered with an error status: its SHARP API is not serving
        return [f"SHARP reservations unreadable (is SHARP enabled in UFM?): {exc}"]
    problems = []
    for pkey, guids in sorted(want.items()):
        have = live.get(pkey)
        if have is None:
            problems.append(
                f"P_Key {pkey:#06x}: no SHARP reservation in UFM "
                "(SHARP disabled, or not reservation_auto_by_pkeys): SHARP is not ready"
            )
        elif have != guids:
            missing, extra = sorted(guids - have), sorted(have - guids)
            problems.append(
                f"P_Key {pkey:#06x}: SHARP reservation GUIDs differ (missing {missing[:4]}, extra {extra[:4]})"
            )
    return problems
