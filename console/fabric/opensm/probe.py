"""Asking the fabric what the isolation audit wants to know (:mod:`.isolation_audit`): SA
PathRecords between sampled host pairs and the P_Key tables of sampled ports, from the SM
host's port (the SM's port shares the Default partition as a full member with every host, so
the SA answers its queries about any pair)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from console.fabric.diags.runner import DiagError
from console.fabric.opensm.isolation_audit import AuditPlan, ProbeResult
from console.fabric.opensm.pkey_tables import PortTables
from console.fabric.opensm.push_types import PushOptions, PushStep, PushTarget


def probe_isolation(target: PushTarget, plan: AuditPlan, options: PushOptions) -> ProbeResult:
    """Ask every pair of ``plan`` for a path (no P_Key) and read its ports' P_Key tables."""
    diags = target.diags(timeout=options.diag_timeout)
    step = PushStep("audit")
    ports = PortTables(target, diags, options)
    ports.load(step)
    wanted = set(plan.ports) | {g for pair in plan.pairs for g in pair}
    if any(g not in ports.lids for g in wanted) or ports.validate(wanted, step)[0]:
        ports.discover(step)
    ports.validate(wanted, step)
    try:
        sm_guid: int | None = diags.sminfo().guid
    except DiagError:
        sm_guid = None
    lids = {g: lp[0] for g, lp in ports.lids.items()}
    asked = [pair for pair in plan.pairs if pair[0] in lids and pair[1] in lids]

    def ask(pair: tuple[int, int]) -> int | None:
        records = diags.path(lids[pair[0]], lids[pair[1]]).records
        return records[0].pkey & 0x7FFF if records else None

    with ThreadPoolExecutor(max_workers=max(1, min(options.parallel, len(asked) or 1))) as pool:
        answers = list(pool.map(ask, asked))
    readable = sorted(g for g in plan.ports if g in lids)
    tables = {g: t for g, t in ports.read(readable, step).items() if not isinstance(t, str)}
    return ProbeResult(
        paths=dict(zip(asked, answers, strict=True)),
        tables=tables,
        missing=sorted(wanted - set(lids)),
        sm_guid=sm_guid,
    )
