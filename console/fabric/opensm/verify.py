"""Proving a partition set on the wire: the port checks and the polling that confirms them.

Verification reads the fabric, never OpenSM's own view: the P_Key table of every explicit
member port (the top bit must match full/limited), of a sample of non-member ports and of ports
that just left a partition (the key must be absent), then ``saquery`` PathRecords restricted to
the P_Key (a member→non-member path must not exist, a full member→member path must).

When a check is trusted: an "absent" check passes trivially until OpenSM has acted on the
SIGHUP, so one early read proves nothing. A clean read counts only when it started after OpenSM
ended a heavy sweep that began after the SIGHUP; targets that can tell (``sweep_mark()`` /
``swept_since(mark)``: the lab reads OpenSM's flushed log) are waited for, others get a second
full read ``settle_s`` after the first clean one, as before.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from console.fabric.diags.runner import DiagError, DiagRunner
from console.fabric.opensm.lint import format_guid
from console.fabric.opensm.partitions import DEFAULT_PARTITION, DEFAULT_PKEY, Member, Membership, Partition
from console.fabric.opensm.pkey_tables import PortTables, Sweep
from console.fabric.opensm.push_types import PushOptions, PushStep, PushTarget
from console.fabric.opensm.vguids import is_virtual


@dataclass(frozen=True)
class PortCheck:
    """Expectation for one port and one P_Key: ``full``, ``limited`` or absent (None)."""

    guid: int
    pkey: int
    membership: str | None
    why: str


def virtual(guid: int, options: PushOptions) -> bool:
    """A member in the console's vGUID space: a pod VF's port, not an end port of the fabric."""
    return options.virtual_prefix is not None and is_virtual(guid, options.virtual_prefix)


def virtual_members(partitions: Iterable[Partition], options: PushOptions) -> int:
    """How many virtual members ``partitions`` (as written to partitions.conf) carry."""
    return sum(1 for p in partitions for m in p.members if isinstance(m.port, int) and virtual(m.port, options))


def default_membership(default: Partition | None, guid: int, sm_guid: int | None) -> str | None:
    """The Default membership (``full``/``limited``/None) OpenSM gives CA port ``guid``.

    OpenSM applies a statement's specifiers in the order the console renders them (keywords in
    :data:`PORT_KEYWORDS` order, then GUIDs) and a later one overrides an earlier one; the SM's
    own port is always full. Without a Default rule OpenSM acts as ``ALL=limited, SELF=full``."""
    if guid == sm_guid:
        return "full"
    rule = default or Partition("Default", DEFAULT_PKEY, members=(Member("ALL", Membership.LIMITED),))
    found: Membership | None = None
    for m in sorted(rule.members, key=Member.sort_key):
        if m.port in ("ALL", "ALL_CAS") or m.port == guid:
            found = rule.effective_membership(m)
    if found is None:
        return None
    return "limited" if found is Membership.LIMITED else "full"


def expected_checks(
    desired: Iterable[Partition],
    previous: Iterable[Partition],
    ca_ports: Sequence[int],
    options: PushOptions,
    *,
    sm_guid: int | None = None,
) -> list[PortCheck]:
    """Port checks proving ``desired`` is live and what left ``previous`` is gone.

    With ``sm_guid`` (the master SM's port, from SMInfo) every checked CA port's Default
    membership is checked too: hosts limited (isolation by default), the SM's port full.
    Virtual members (pod VFs, :func:`virtual`) are in the file OpenSM reads but on no end port:
    they get no check (OpenSM 3.3 has no vports; see docs/api.md)."""
    checks: dict[tuple[int, int], PortCheck] = {}
    desired = list(desired)
    default = next((p for p in desired if p.pkey == DEFAULT_PKEY), None)
    desired = [p for p in desired if p.pkey != DEFAULT_PKEY]
    previous = [p for p in previous if p.pkey != DEFAULT_PKEY]
    ca_set = sorted(ca_ports)
    for p in desired:
        members: dict[int, str] = {}
        for m in p.members:
            ms = p.effective_membership(m)
            # allow_both_pkeys is FALSE (OpenSM's default), so "both" is programmed as full.
            label = "limited" if ms is Membership.LIMITED else "full"
            if isinstance(m.port, int):
                if not virtual(m.port, options):
                    members[m.port] = label
            elif m.port in ("ALL", "ALL_CAS"):
                for guid in ca_set[: options.non_member_sample * 2]:
                    members.setdefault(guid, label)
        for guid, label in members.items():
            checks[(guid, p.pkey)] = PortCheck(guid, p.pkey, label, f"member of {p.name}")
        if any(m.port in ("ALL", "ALL_CAS") for m in p.members):
            continue
        outsiders = [g for g in ca_set if g not in members]
        sample = outsiders[: options.non_member_sample] + [g for g in options.non_members if g not in members]
        for guid in sample:
            checks.setdefault((guid, p.pkey), PortCheck(guid, p.pkey, None, f"not in {p.name}"))
    desired_keys = {p.pkey: p for p in desired}
    for p in previous:
        still = desired_keys.get(p.pkey)
        keep = {m.port for m in still.members} if still else set()
        for m in p.members:
            if isinstance(m.port, int) and m.port not in keep:
                checks.setdefault((m.port, p.pkey), PortCheck(m.port, p.pkey, None, f"left {p.name}"))
    if sm_guid is not None:
        cas = set(ca_set)
        # Every checked host, and a sample of hosts even when no partition names any (a push that
        # changes only the Default partition is proved on ports too).
        hosts = set(ca_set[: options.non_member_sample]) | ({sm_guid} & cas)
        for guid in sorted(({c.guid for c in checks.values()} & cas) | hosts):
            want = default_membership(default or DEFAULT_PARTITION, guid, sm_guid)
            checks.setdefault((guid, DEFAULT_PKEY), PortCheck(guid, DEFAULT_PKEY, want, "Default partition"))
    return sorted(checks.values(), key=lambda c: (c.pkey, c.guid))


def verify_partitions(
    target: PushTarget,
    diags: DiagRunner,
    desired: Sequence[Partition],
    previous: Sequence[Partition],
    options: PushOptions,
    step: PushStep,
    *,
    sweep: Sweep | None = None,
) -> list[str]:
    """Poll the ports until every check holds or time runs out; returns the mismatches.

    ``sweep`` (after a reload): a clean read must have started after OpenSM ended a heavy sweep
    that followed the reload; without a sweep signal, a second full read ``settle_s`` later.
    """
    deadline = time.monotonic() + options.verify_timeout
    head = len(step.log)
    ports = PortTables(target, diags, options)
    ports.load(step)
    sm_guid = _sm_port(diags, step) if options.check_default else None
    checks = expected_checks(desired, previous, list(ports.lids), options, sm_guid=sm_guid)
    wanted = {c.guid for c in checks}
    if ports.source != "ibnetdiscover":
        missing = [g for g in wanted if g not in ports.lids]
        wrong, unchecked = ports.validate(wanted, step) if not missing else ([], [])
        if missing or wrong or unchecked:
            step.log.append(
                f"{len(missing) + len(wrong) + len(unchecked)} port(s) not confirmed by the "
                f"{ports.source} LID map: rediscovering"
            )
            ports.discover(step)
            checks = expected_checks(desired, previous, list(ports.lids), options, sm_guid=sm_guid)
            wanted = {c.guid for c in checks}
    # After a fresh discovery a LID that answers for another port means the fabric changed
    # under the push; a port that did not answer NodeInfo is read with smpquery.
    wrong, _ = ports.validate(wanted, step)
    step.log.insert(head, f"{len(checks)} port checks on {len(wanted)} ports")
    vfs = virtual_members(desired, options)
    if vfs:
        step.log.insert(
            head + 1,
            f"{vfs} virtual port GUID(s) (pod VFs) are members in the partitions.conf OpenSM reads; "
            "no end port's P_Key table carries them: not checked on the wire",
        )
    step.log.append(
        f"LIDs: {ports.source}; P_Key tables via " + ("the MAD helper" if ports.mad is not None else "smpquery")
    )
    # One dead host blocks nobody: a member port that is not on the fabric is a finding on its
    # own partition (the pipeline raises it as an alarm), not a mismatch that rolls back every
    # partition of the change. Only a port that shows a wrong key does that.
    gone = [c for c in checks if c.membership is not None and ports.lids.get(c.guid) is None]
    _absent(step, gone)
    mismatches = [f"{format_guid(g)}: LID {ports.lids[g][0]} answers for another port" for g in sorted(wrong)]
    if mismatches:
        return mismatches
    everything = [c for c in checks if ports.lids.get(c.guid) is not None]
    pending, last, rounds = _poll(ports, everything, sweep, options, step, deadline)
    if isinstance(pending, str):
        return [pending]
    step.log.append(f"{rounds} read round(s)")
    unread = {c.guid for c in pending if c.guid not in last or not last[c.guid].startswith("shows ")}
    if unread:
        # Ports that never answered: gone from the fabric (unplugged, powered off) is a finding;
        # still there but unreadable proves nothing, so it stays a mismatch (fail safe).
        ports.discover(step)
        left = {g for g in unread if g not in ports.lids}
        _absent(step, [c for c in pending if c.guid in left and c.membership is not None])
        pending = [c for c in pending if c.guid not in left]
        everything = [c for c in everything if c.guid not in left]
    for c in everything:
        index = ports.indexes.get(c.guid, {}).get(c.pkey) if c.membership is not None else None
        if index is not None:
            step.pkey_indexes.setdefault(c.pkey, {})[c.guid] = index
    mismatches = [
        f"{format_guid(c.guid)} P_Key {c.pkey:#06x}: expected "
        f"{c.membership or 'absent'} ({c.why}), {last.get(c.guid, 'unread')}"
        for c in pending
    ]
    if mismatches or not options.check_paths:
        return mismatches
    lids = {g: lp[0] for g, lp in ports.lids.items()}
    return verify_paths(diags, checks, lids, step, parallel=options.parallel)


def _absent(step: PushStep, checks: Sequence[PortCheck]) -> None:
    """Record member ports that are not on the fabric, by P_Key, on the verify step."""
    for c in checks:
        if c.pkey == DEFAULT_PKEY:
            continue
        found = step.absent.setdefault(c.pkey, [])
        if c.guid not in found:
            found.append(c.guid)
            step.log.append(f"{format_guid(c.guid)}: not on the fabric ({c.why}, P_Key {c.pkey:#06x}): a finding")


def _poll(
    ports: PortTables,
    everything: list[PortCheck],
    sweep: Sweep | None,
    options: PushOptions,
    step: PushStep,
    deadline: float,
) -> tuple[list[PortCheck] | str, dict[int, str], int]:
    """Read the ports until every check holds (after OpenSM's sweep, when it tells) or time
    runs out: (the checks still failing, or why nothing could be confirmed; the last reading
    of each failing port; read rounds)."""
    pending = list(everything)
    confirmed = sweep is None
    last: dict[int, str] = {}
    rounds = 0
    while pending:
        # Decided before the read: this read counts as after the sweep only if it began after.
        after_sweep = sweep is not None and sweep.known and sweep.done()
        guids = sorted({c.guid for c in pending})
        tables = ports.read(guids, step)
        rounds += 1
        still = []
        for c in pending:
            table = tables[c.guid]
            if isinstance(table, str):
                last[c.guid] = table
                still.append(c)
            elif table.get(c.pkey) != c.membership:
                last[c.guid] = f"shows {table.get(c.pkey) or 'no key'}"
                still.append(c)
        pending = still
        if not pending and not confirmed:
            assert sweep is not None
            confirmed = True
            if sweep.known:
                if after_sweep:
                    break  # this clean read began after OpenSM's sweep ended
                waited = time.monotonic()
                while not sweep.done() and time.monotonic() < deadline:
                    time.sleep(0.02)
                if not sweep.done():
                    why = f"OpenSM logged no end of sweep within {options.verify_timeout:.0f}s of the reload: cannot confirm the ports"
                    return why, last, rounds
                step.log.append(
                    f"OpenSM sweep ended {time.monotonic() - waited:.2f}s after the first "
                    "clean read: reading every port again"
                )
            else:
                time.sleep(options.settle_s)
            pending = list(everything)
            continue
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(options.poll_interval)
    return pending, last, rounds


def _sm_port(diags: DiagRunner, step: PushStep) -> int | None:
    """The master SM's port GUID (SMInfo), so its Default membership is expected full; None
    (and no Default checks) when the SM does not answer."""
    try:
        return diags.sminfo().guid
    except DiagError as exc:
        step.log.append(f"SMInfo did not answer ({exc}): Default memberships not checked")
        return None


def verify_paths(
    diags: DiagRunner,
    checks: Sequence[PortCheck],
    lids: dict[int, int],
    step: PushStep,
    *,
    parallel: int = 4,
) -> list[str]:
    """Per partition: full member → non-member must have no path; full → member must; in the
    Default partition two limited members (hosts) must have none.

    The few ``saquery`` calls run side by side (each with the runner's timeout)."""
    queries: list[tuple[int, int, int, bool]] = []  # (pkey, src guid, dst guid, expect a path)
    for pkey in sorted({c.pkey for c in checks}):
        mine = [c for c in checks if c.pkey == pkey and c.guid in lids]
        full = [c.guid for c in mine if c.membership == "full"]
        members = [c.guid for c in mine if c.membership is not None]
        outsiders = [c.guid for c in mine if c.membership is None]
        limited = [c.guid for c in mine if c.membership == "limited"]
        if pkey == DEFAULT_PKEY and len(limited) >= 2:
            queries.append((pkey, limited[0], limited[1], False))  # two hosts: isolated by default
        if not full:
            continue
        others = [g for g in members if g != full[0]]
        if outsiders:
            queries.append((pkey, full[0], outsiders[0], False))
        if others:
            queries.append((pkey, full[0], others[0], True))

    def ask(query: tuple[int, int, int, bool]) -> bool:
        pkey, src, dst, _ = query
        return diags.path(lids[src], lids[dst], pkey=pkey).found

    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(queries) or 1))) as pool:
        answers = list(pool.map(ask, queries))
    mismatches = []
    for (pkey, src, dst, expect), found in zip(queries, answers, strict=True):
        step.log.append(
            f"saquery path {format_guid(src)} → {format_guid(dst)} in {pkey:#06x}: {'found' if found else 'none'}"
        )
        if found != expect:
            mismatches.append(
                f"path {format_guid(src)} → {format_guid(dst)} in P_Key {pkey:#06x}: "
                f"expected {'a path' if expect else 'no path'}"
            )
    return mismatches
