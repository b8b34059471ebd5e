"""The isolation audit as plain code: which pairs of hosts to ask the SA about and which P_Key
tables to read (:func:`plan_audit`), and what the answers mean (:func:`judge`).

The SA answers a PathRecord between two ports without a P_Key when they share any partition in
which one of them is a full member: so one query per pair proves or disproves that two hosts can
talk, on any key. The audit samples pairs of hosts of different tenants, of free hosts (in no
reservation, which must reach nothing but the SM) and of free hosts with tenants' and service
hosts, at most ``max_pairs`` per run; the sample is drawn afresh each run (``seed``), so every
pair is asked about over time. P_Key tables of a sample of hosts show what the ports carry: a key
the partitions do not give that port (a table rewritten from a host, a stale SM) is a finding,
and the Default partition must be limited on every host.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from console.fabric.opensm.isolation import SERVICE, TENANT, effective_members, leaks
from console.fabric.opensm.lint import format_guid
from console.fabric.opensm.partitions import DEFAULT_PKEY, Membership, Partition

FREE = "free"


@dataclass(frozen=True)
class AuditPlan:
    """What one audit asks: host pairs (PathRecord, no P_Key) and ports (P_Key table)."""

    pairs: tuple[tuple[int, int], ...]
    ports: tuple[int, ...]


@dataclass(frozen=True)
class ProbeResult:
    """What the SM host answered: pairs with a path (and the path's P_Key), the P_Key tables
    read (port → P_Key → membership), the ports not on the fabric, the master SM's port."""

    paths: Mapping[tuple[int, int], int | None]  # None: no path
    tables: Mapping[int, Mapping[int, str]]
    missing: Collection[int] = ()
    sm_guid: int | None = None


@dataclass
class Verdict:
    """Leaks (two hosts that can talk and must not), findings (what the ports or files carry
    that they should not), and the Default membership the hosts showed."""

    leaks: list[dict[str, object]] = field(default_factory=list)
    findings: list[dict[str, object]] = field(default_factory=list)
    default_membership: str = "unknown"


def group_of(guid: int, owners: Mapping[int, str]) -> str:
    """``tenant:3``, ``service:storage`` or ``free``."""
    return owners.get(guid) or FREE


def plan_audit(
    owners: Mapping[int, str],
    hosts: Collection[int],
    *,
    seed: int,
    max_pairs: int = 48,
    per_group_pair: int = 2,
    max_ports: int = 64,
) -> AuditPlan:
    """Sample the pairs that must not talk and the ports to read (see the module docstring)."""
    rng = random.Random(seed)
    groups: dict[str, list[int]] = {}
    for guid in sorted(set(hosts) | set(owners)):
        groups.setdefault(group_of(guid, owners), []).append(guid)
    names = sorted(groups)
    wanted: list[tuple[int, int]] = []
    for i, a in enumerate(names):
        for b in names[i:]:
            if a == b and a != FREE:
                continue  # one tenant's hosts (or one service's) may talk to each other
            if a.startswith(SERVICE) and b.startswith(SERVICE):
                continue
            if a.startswith(SERVICE) or b.startswith(SERVICE):
                if FREE not in (a, b):
                    continue  # a service partition decides which tenants reach it
            for _ in range(per_group_pair):
                x, y = rng.choice(groups[a]), rng.choice(groups[b])
                if x != y:
                    wanted.append((x, y) if x < y else (y, x))
    pairs = sorted(set(wanted))
    if len(pairs) > max_pairs:
        pairs = sorted(rng.sample(pairs, max_pairs))
    ports = {g for pair in pairs for g in pair}
    for guids in groups.values():
        ports.update(rng.sample(guids, min(len(guids), 4)))
    chosen = sorted(ports)
    if len(chosen) > max_ports:
        chosen = sorted(rng.sample(chosen, max_ports))
    return AuditPlan(tuple(pairs), tuple(chosen))


def expected_keys(
    partitions: Sequence[Partition], port: int, hosts: Collection[int], sm_guid: int | None
) -> dict[int, str]:
    """P_Key → ``full``/``limited`` a port's table should show for these partitions."""
    out: dict[int, str] = {}
    for p in partitions:
        membership = effective_members(p, hosts, sm_guid=sm_guid).get(port)
        if membership is not None:
            out[p.pkey] = "limited" if membership is Membership.LIMITED else "full"
    return out


def judge(
    plan: AuditPlan,
    probe: ProbeResult,
    partitions: Sequence[Partition],
    owners: Mapping[int, str],
    *,
    hosts: Collection[int],
    names: Mapping[int, str],
    reservations: Mapping[int, int],
) -> Verdict:
    """What the answers mean: every sampled pair with a path is a leak; a host whose table
    shows a key the partitions do not give it, or the Default as a full member, is a finding."""
    verdict = Verdict()

    def port(guid: int) -> dict[str, object]:
        return {
            "guid": format_guid(guid),
            "name": names.get(guid, ""),
            "owner": group_of(guid, owners),
            "reservation": reservations.get(guid),
        }

    for a, b in plan.pairs:
        pkey = probe.paths.get((a, b))
        if (a, b) not in probe.paths or pkey is None:
            continue
        shown = f"{pkey:#06x}" if pkey else "a shared key"
        verdict.leaks.append(
            {
                "a": port(a),
                "b": port(b),
                "pkey": f"{pkey:#06x}" if pkey else None,
                "message": f"{names.get(a) or format_guid(a)} ({group_of(a, owners)}) reaches "
                f"{names.get(b) or format_guid(b)} ({group_of(b, owners)}) on {shown}",
            }
        )
    every = set(hosts) | set(owners)
    defaults = set()
    for guid, table in sorted(probe.tables.items()):
        want = expected_keys(partitions, guid, every, probe.sm_guid)
        for pkey, membership in sorted(table.items()):
            if pkey == DEFAULT_PKEY and guid != probe.sm_guid:
                defaults.add(membership)
            if want.get(pkey) == membership or pkey == DEFAULT_PKEY and membership == "limited":
                continue
            verdict.findings.append(
                {
                    "kind": "unexpected_key",
                    "port": port(guid),
                    "pkey": f"{pkey:#06x}",
                    "membership": membership,
                    "expected": want.get(pkey) or "absent",
                    "message": f"{names.get(guid) or format_guid(guid)} carries P_Key {pkey:#06x} as a {membership} "
                    f"member; the partitions say {want.get(pkey) or 'it has none'}",
                    "fix": "push the fabric again (the console rewrites what OpenSM programs) and find who wrote the table",
                }
            )
    verdict.default_membership = "unknown" if not defaults else defaults.pop() if len(defaults) == 1 else "mixed"
    return verdict


def rule_findings(
    partitions: Sequence[Partition],
    owners: Mapping[int, str],
    *,
    hosts: Collection[int],
    sm_guid: int | None,
    names: Mapping[int, str],
    operator_pkeys: Collection[int],
) -> list[dict[str, object]]:
    """The isolation rule applied to the partitions the SM host's file holds, with the fix."""
    out = []
    for leak in leaks(partitions, owners, hosts=hosts, sm_guid=sm_guid):
        if leak.pkey == DEFAULT_PKEY:
            fix = "the Default partition must make hosts limited members (ALL=limited, ALL_SWITCHES=full, SELF=full)"
            if leak.a == sm_guid:
                fix = "the SM's port is a full member of the Default partition: do not give its host to a tenant"
        elif leak.pkey in operator_pkeys:
            fix = (
                f"make the tenants' ports limited members of {leak.partition} ({leak.pkey:#06x}) "
                "or split it per tenant; ALL=full gives every host full membership"
            )
        else:
            fix = "push the fabric again: the console's own partitions keep tenants apart"
        out.append({"kind": "rule", **leak.as_json(names), "fix": fix})
    return out


def tenant_of(owner: str) -> int | None:
    """The tenant id of ``tenant:<id>``."""
    return int(owner[len(TENANT) :]) if owner.startswith(TENANT) else None
