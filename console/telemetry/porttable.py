"""Every port of a fabric as the latest discovery found it, beside the live counters telemetry
keeps per link: the rows of the ports page (and its CSV).

A discovered link ``[a, a_port, b, b_port, rate]`` gives two ports. Telemetry measures a link at
one of its switch ends and keys it ``switch/port`` (:func:`~console.telemetry.linkmap.link_id`);
both ports of the link show that link's state, utilisation, PortXmitWait rate and error
counters (the measuring port's), with Tx/Rx seen from each port. Plain data, no Django.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from console.telemetry.core import ERROR_COUNTERS
from console.telemetry.linkmap import link_id

_RATE = re.compile(r"^(\d+x)\s*(\S*)$")


@dataclass
class PortRow:
    device: str
    kind: str  # "switch" or "node"
    port: int
    peer: str
    peer_port: int
    state: str  # Active, Down, or "no data" (telemetry has not measured the link)
    width: str  # 4x
    speed: str  # NDR
    util_pct: float | None
    xmit_wait: int | None  # PortXmitWait ticks per second at the measuring port
    errors: dict[str, int] = field(default_factory=dict)  # totals per error counter
    link: str = ""

    @property
    def error_total(self) -> int:
        return sum(self.errors.values())


def split_rate(rate: str) -> tuple[str, str]:
    """``4xNDR`` → (``4x``, ``NDR``); an unparsed rate is all speed."""
    hit = _RATE.match(rate.strip())
    return (hit.group(1), hit.group(2)) if hit else ("", rate.strip())


def _live_of(links: Mapping[str, Any], a: str, a_port: int, b: str, b_port: int) -> tuple[str, Any]:
    for end in (link_id(b, b_port), link_id(a, a_port)):
        if end in links:
            return end, links[end]
    return "", None


def port_rows(topology: Mapping[str, Any], snapshot: Mapping[str, Any] | None) -> list[PortRow]:
    """The ports of a discovery's ``topology`` joined with a telemetry ``snapshot``'s links."""
    switches = {n["name"] for n in topology.get("nodes", []) if n.get("kind") == "switch"}
    links: Mapping[str, Any] = (snapshot or {}).get("links") or {}
    rows: list[PortRow] = []
    for a, a_port, b, b_port, rate in topology.get("links", []):
        width, speed = split_rate(rate or "")
        lid, live = _live_of(links, a, a_port, b, b_port)
        totals = dict.fromkeys(ERROR_COUNTERS, 0)
        if live is not None:
            totals.update({k: int(v) for k, v in (live.get("error_totals") or {}).items() if k in totals})
        for dev, port, peer, peer_port in ((a, a_port, b, b_port), (b, b_port, a, a_port)):
            rows.append(
                PortRow(
                    device=dev,
                    kind="switch" if dev in switches else "node",
                    port=int(port),
                    peer=peer,
                    peer_port=int(peer_port),
                    state="no data" if live is None else ("Active" if live.get("up") else "Down"),
                    width=width,
                    speed=speed,
                    util_pct=None if live is None else round(100 * float(live.get("util", 0)), 1),
                    xmit_wait=None if live is None else int(live.get("xmit_wait", 0)),
                    errors=dict(totals),
                    link=lid,
                )
            )
    rows.sort(key=lambda r: (r.device, r.port))
    return rows
