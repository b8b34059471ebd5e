"""Fabric validation, second part (issue 35): the tests that read more of the wire than one
ibnetdiscover run — the switches' forwarding tables, the ports' error counters — and the ones
that hold the wire against what the console manages (its partitions, its OpenSM files, the
design's cabling). Each gives a :class:`~designer.imports.health.Verdict`; the console gathers
the inputs (through the SM hosts' agents) and stores the run.

- ``guids`` (on the wire): a switch port whose link is up with nothing discovered behind it
  (the node there has a duplicate GUID: ibnetdiscover merged it into its twin);
- ``routes``: every host pair has a route: from each leaf a host hangs off, following the linear
  forwarding tables to every host port's LID reaches that port — no missing entry, no port that
  leads nowhere (a dead end), no loop;
- ``port-errors``: no port's error counters above the thresholds ibqueryerrors applies (the
  format and defaults of rdma-core's ``error_thresholds`` file, :func:`parse_thresholds`);
- ``pkeys``, ``sm-config``, ``cabling``: what the console's own verification, the SM hosts'
  agents and the design comparison found, as verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from designer.imports.health import Verdict, guids, label
from designer.imports.model import Discovery, IbNode

#: An LFT entry no port answers to (OpenSM leaves unrouted LIDs at 255).
NO_PORT = 255

#: The values rdma-core's ``infiniband-diags/etc/error_thresholds`` suggests (ibqueryerrors itself
#: reports any count above 0): counter → most a port may show before it is reported. PortXmitWait
#: is left out: it counts congestion, not faults (the live view shows it as a rate).
DEFAULT_THRESHOLDS: Mapping[str, int] = {
    "SymbolErrorCounter": 10,
    "LinkErrorRecoveryCounter": 10,
    "LinkDownedCounter": 10,
    "PortRcvErrors": 10,
    "PortRcvRemotePhysicalErrors": 100,
    "PortRcvSwitchRelayErrors": 100,
    "PortXmitDiscards": 100,
    "PortXmitConstraintErrors": 100,
    "PortRcvConstraintErrors": 100,
    "LocalLinkIntegrityErrors": 10,
    "ExcessiveBufferOverrunErrors": 10,
    "VL15Dropped": 100,
}


@dataclass(frozen=True)
class _Host:
    lid: int
    label: str
    leaf: str  # the switch node id the port is cabled to
    leaf_port: int


def _hosts(disc: Discovery) -> list[_Host]:
    """Every linked CA port with a LID, and the switch port it hangs off."""
    nodes = disc.by_id()
    out = []
    for node in disc.cas:
        for p in node.ports:
            peer = nodes.get(p.peer_id)
            if p.lid and peer is not None and peer.kind == "Switch":
                out.append(_Host(p.lid, f"{label(node)} port {p.port}", peer.node_id, p.peer_port))
    return out


def routes(disc: Discovery, lfts: Mapping[str, list[int]]) -> Verdict:
    """``lfts``: switch node id → its linear forwarding table (port per LID, as read from the
    switch). Walks from every leaf to every host LID; each switch's answer for a LID is
    found once (memoised), so the walk costs switches × host LIDs at most."""
    out = Verdict(
        "routes",
        "Every host pair has a route (no missing entry, dead end or loop)",
        "Let the SM route again (a heavy sweep: restart OpenSM or bounce a port); a dead end points "
        "at a link that went down after the last routing pass, a loop or a missing entry at a "
        "routing engine that failed: check its log",
    )
    nodes = disc.by_id()
    hosts = _hosts(disc)
    leaves = sorted({h.leaf for h in hosts})
    missing_tables = [leaf for leaf in leaves if leaf not in lfts]
    for leaf in missing_tables:
        out.add(f"{label(nodes[leaf])}: its forwarding table could not be read")
    peers = {n.node_id: {p.port: (p.peer_id, p.peer_port) for p in n.ports} for n in disc.switches}
    limit = len(peers) + 1
    for host in hosts:
        # switch → None (delivers to the host) or the first fault on its path, for this LID
        known: dict[str, str | None] = {}
        for leaf in leaves:
            if leaf in lfts:
                _walk(leaf, host, lfts, peers, nodes, known, limit)
        reported: set[str] = set()
        for leaf in leaves:
            fault = known.get(leaf)
            if fault is not None and fault not in reported:
                reported.add(fault)
                out.add(f"to LID {host.lid} ({host.label}): {fault}")
    return out


def _walk(
    start: str,
    host: _Host,
    lfts: Mapping[str, list[int]],
    peers: Mapping[str, Mapping[int, tuple[str, int]]],
    nodes: Mapping[str, IbNode],
    known: dict[str, str | None],
    limit: int,
) -> None:
    path: list[str] = []
    fault: str | None = None
    here = start
    while True:
        if here in known:
            fault = known[here]
            break
        if here in path or len(path) > limit:
            fault = "a loop through " + " → ".join(label(nodes[s]) for s in path[path.index(here) :] + [here])
            break
        path.append(here)
        table = lfts.get(here)
        if table is None:
            fault = f"{label(nodes[here])}: its forwarding table could not be read"
            break
        port = table[host.lid] if host.lid < len(table) else NO_PORT
        if port in (0, NO_PORT) or port is None:
            fault = f"{label(nodes[here])} has no entry for it"
            break
        peer = peers.get(here, {}).get(port)
        if peer is None:
            fault = f"{label(nodes[here])} sends it out port {port}, which leads nowhere (a dead end)"
            break
        if (here, port) == (host.leaf, host.leaf_port):
            break  # delivered
        if peer[0] not in peers:
            fault = f"{label(nodes[here])} sends it out port {port}, to {label(nodes[peer[0]])}, not its owner"
            break
        here = peer[0]
    for switch in path:
        known[switch] = fault


#: PortInfo states of a port with a live link (the peer trained, whatever the SM did since).
LINKED_STATES = frozenset({"Init", "Armed", "Active"})


def guids_on_the_wire(disc: Discovery, states: Mapping[tuple[str, int], str]) -> Verdict:
    """:func:`~designer.imports.health.guids`, and the duplicates one discovery cannot show:
    ibnetdiscover keeps one node per GUID, so the second node of a duplicate vanishes with its
    link. ``states``: (switch node id, port) → the port's PortInfo state as read now; a switch
    port with a live link and nothing discovered behind it is where that second node sits."""
    out = guids(disc)
    nodes = disc.by_id()
    linked = {(n.node_id, p.port) for n in disc.switches for p in n.ports}
    for (switch, port), state in sorted(states.items()):
        if state in LINKED_STATES and (switch, port) not in linked and switch in nodes:
            out.add(
                f"{label(nodes[switch])} port {port} is {state} but nothing was discovered behind it: "
                "the node there has a GUID already seen elsewhere (ibnetdiscover merged the two)"
            )
    return out


def parse_thresholds(text: str) -> dict[str, int]:
    """An ibqueryerrors thresholds file (``Counter=value`` lines; ``#`` comments): the defaults
    with the file's values over them."""
    out = dict(DEFAULT_THRESHOLDS)
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, value = line.partition("=")
        if not sep or not value.strip().isascii() or not value.strip().isdigit():
            raise ValueError(f"not a threshold line: {raw.strip()!r} (expected Counter=number)")
        out[name.strip()] = int(value.strip())
    return out


def port_errors(
    readings: Mapping[tuple[str, int], Mapping[str, int]], thresholds: Mapping[str, int] = DEFAULT_THRESHOLDS
) -> Verdict:
    """``readings``: (port's owner, port number) → its error counters as read (totals since the
    last clear, as ibqueryerrors reads them). A port is reported for every counter above its
    threshold; a counter with no threshold is not judged."""
    out = Verdict(
        "port-errors",
        "No port's error counters above the thresholds",
        "Check the cable and its transceivers at both ends (symbol errors and link recoveries are "
        "the cable's; receive errors and discards may be a neighbour's), then clear the counters "
        "(perfquery -R) and watch them",
    )
    for (owner, port), counters in sorted(readings.items()):
        over = [
            f"{name} {value} > {thresholds[name]}"
            for name, value in sorted(counters.items())
            if name in thresholds and value > thresholds[name]
        ]
        if over:
            out.add(f"{owner} port {port}: " + ", ".join(over))
    return out


def pkeys(mismatches: Iterable[str]) -> Verdict:
    """What the console's verification found missing from the ports (P_Key tables and QoS
    against the partitions it applied, with the isolation rules)."""
    out = Verdict(
        "pkeys",
        "P_Key tables carry the partitions the console applied",
        "The console pushes its partitions again on its next verification (or now: manage.py fabric "
        "reconcile); a key that keeps going missing means another SM or a hand-written "
        "partitions.conf writes the same ports",
    )
    for line in mismatches:
        out.add(line)
    return out


def sm_config(behind: Iterable[str], routing: Mapping[str, object] | None) -> Verdict:
    """``behind``: SM hosts whose OpenSM runs files other than the console's (a message each);
    ``routing``: the routing check (``configured``, ``in_use``, ``fallback``)."""
    out = Verdict(
        "sm-config",
        "Every subnet manager runs the configuration the console manages",
        "Let the console push to the host again (its agent does on reconnect), and find who edited "
        "OpenSM's files by hand; a routing fallback means the configured engine failed: read "
        "OpenSM's log",
    )
    for line in behind:
        out.add(line)
    if routing and routing.get("fallback"):
        out.add(f"routing engine {routing.get('configured')} configured, {routing.get('in_use')} in use (a fallback)")
    return out


def cabling(compare: Mapping[str, Any]) -> Verdict:
    """The design comparison's findings (a compare document: ``missing``, ``extra``,
    ``miswired``, ``mismatches`` — each item with its ``label`` — and ``fixes``) as a verdict:
    every link, rail and tier where the design puts it."""
    fixes = [str(f) for f in compare.get("fixes") or []]
    out = Verdict(
        "cabling",
        "Cabling as designed (every link, rail and tier where the design puts it)",
        "; ".join(fixes[:3]) + (f" (and {len(fixes) - 3} more)" if len(fixes) > 3 else "") or "Recable as designed",
    )
    for kind in ("missing", "extra", "miswired", "mismatches"):
        for item in compare.get(kind) or []:
            out.add(f"{kind}: {item.get('label', item)}")
    return out
