"""The partition push engine: render → lint → atomic swap → SIGHUP → verify on the ports → rollback.

This is what the Celery pipeline calls for an OpenSM-driven fabric (the lab included). It is a
plain function over a small :class:`PushTarget` protocol, so it runs the same against a lab, a
local OpenSM host, or a test double. Every step is idempotent: pushing the same set twice swaps
nothing the second time and only re-verifies.

Verification reads the fabric, never OpenSM's own view: ``smpquery pkeys`` on every explicit
member port (the top bit must match full/limited), on a sample of non-member ports and on ports
that just left a partition (the key must be absent), then ``saquery`` PathRecords restricted to
the P_Key (a member→non-member path must not exist, a full member→member path must).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from console.fabric.diags.runner import DiagError, DiagRunner
from console.fabric.opensm.files import Artefact, ArtefactStore
from console.fabric.opensm.lint import ArtefactRejected, LintProblem, format_guid
from console.fabric.opensm.partitions import (
    DEFAULT_PKEY,
    Membership,
    Partition,
    parse_partitions,
    render_partitions,
)

FILENAME = "partitions.conf"


class PushTarget(Protocol):
    """What the engine needs from an OpenSM host: its files, a reload, and diags."""

    @property
    def artefacts(self) -> ArtefactStore: ...

    def reload(self) -> None: ...

    def diags(self, *, timeout: float | None = None) -> DiagRunner: ...


@dataclass(frozen=True)
class PushOptions:
    """Knobs of one push. ``non_members`` adds explicit ports that must *not* get the keys."""

    include_default: bool = True
    verify_timeout: float = 15.0
    poll_interval: float = 0.1
    diag_timeout: float = 5.0
    parallel: int = 6
    non_member_sample: int = 4
    non_members: Sequence[int] = ()
    check_paths: bool = True
    # After a change, checks must hold on two reads this far apart: an "absent" check passes
    # trivially until OpenSM has processed the SIGHUP, so one lucky read proves nothing.
    settle_s: float = 0.5


@dataclass
class PushStep:
    """One step of a push, as the UI shows it."""

    name: str
    status: str = "pending"  # pending | ok | failed | skipped
    log: list[str] = field(default_factory=list)
    duration_s: float = 0.0


@dataclass
class PushResult:
    """Outcome of a push: ``verified``, ``unchanged`` (verified, nothing to swap), ``refused``
    (lint/render failed, nothing written), ``rolled_back`` (mismatch, LKG restored and verified)
    or ``rollback_failed``."""

    outcome: str
    steps: list[PushStep]
    problems: list[LintProblem] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the desired partitions are live and verified."""
        return self.outcome in ("verified", "unchanged")

    def step(self, name: str) -> PushStep:
        """The step called ``name``."""
        return next(s for s in self.steps if s.name == name)


@dataclass(frozen=True)
class PortCheck:
    """Expectation for one port and one P_Key: ``full``, ``limited`` or absent (None)."""

    guid: int
    pkey: int
    membership: str | None
    why: str


class _Steps:
    def __init__(self) -> None:
        self.steps: list[PushStep] = []

    def run(self, name: str) -> PushStep:
        step = PushStep(name, status="running")
        self.steps.append(step)
        return step


def expected_checks(
    desired: Iterable[Partition],
    previous: Iterable[Partition],
    ca_ports: Sequence[int],
    options: PushOptions,
) -> list[PortCheck]:
    """Port checks proving ``desired`` is live and what left ``previous`` is gone."""
    checks: dict[tuple[int, int], PortCheck] = {}
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
                members[m.port] = label
            elif m.port in ("ALL", "ALL_CAS"):
                for guid in ca_set[: options.non_member_sample * 2]:
                    members.setdefault(guid, label)
        for guid, label in members.items():
            checks[(guid, p.pkey)] = PortCheck(guid, p.pkey, label, f"member of {p.name}")
        if any(m.port in ("ALL", "ALL_CAS") for m in p.members):
            continue
        outsiders = [g for g in ca_set if g not in members]
        sample = outsiders[: options.non_member_sample] + [
            g for g in options.non_members if g not in members
        ]
        for guid in sample:
            checks.setdefault((guid, p.pkey), PortCheck(guid, p.pkey, None, f"not in {p.name}"))
    desired_keys = {p.pkey: p for p in desired}
    for p in previous:
        still = desired_keys.get(p.pkey)
        keep = {m.port for m in still.members} if still else set()
        for m in p.members:
            if isinstance(m.port, int) and m.port not in keep:
                checks.setdefault(
                    (m.port, p.pkey), PortCheck(m.port, p.pkey, None, f"left {p.name}")
                )
    return sorted(checks.values(), key=lambda c: (c.pkey, c.guid))


def _verify(
    diags: DiagRunner,
    desired: Sequence[Partition],
    previous: Sequence[Partition],
    options: PushOptions,
    step: PushStep,
    *,
    settle: bool = True,
) -> list[str]:
    """Poll the ports until every check holds or time runs out; returns the mismatches."""
    topo = diags.ibnetdiscover()
    lids = {
        guid: topo.nodes[nid].lid
        for (nid, _), guid in topo.port_guids.items()
        if not topo.nodes[nid].is_switch
    }
    checks = expected_checks(desired, previous, list(lids), options)
    step.log.append(f"{len(checks)} port checks on {len({c.guid for c in checks})} ports")
    mismatches = [
        f"{format_guid(c.guid)}: not on the fabric ({c.why}, P_Key {c.pkey:#06x})"
        for c in checks
        if c.membership is not None and lids.get(c.guid) is None
    ]
    if mismatches:
        return mismatches
    everything = [c for c in checks if lids.get(c.guid) is not None]
    pending = list(everything)
    deadline = time.monotonic() + options.verify_timeout
    confirmed_at: float | None = None
    last: dict[int, str] = {}
    with ThreadPoolExecutor(max_workers=options.parallel) as pool:
        while pending:
            guids = sorted({c.guid for c in pending})

            def read(guid: int) -> tuple[int, dict[int, str] | str]:
                try:
                    return guid, diags.pkeys(lids[guid], timeout=options.diag_timeout).pkeys()
                except DiagError as exc:  # transient while OpenSM re-sweeps: poll again
                    return guid, str(exc)

            tables = dict(pool.map(read, guids))
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
            if not pending and settle and confirmed_at is None:
                # First clean read: re-read everything once more after the settle time.
                confirmed_at = time.monotonic()
                pending = list(everything)
                time.sleep(options.settle_s)
                continue
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(options.poll_interval)
    mismatches = [
        f"{format_guid(c.guid)} P_Key {c.pkey:#06x}: expected "
        f"{c.membership or 'absent'} ({c.why}), {last.get(c.guid, 'unread')}"
        for c in pending
    ]
    if mismatches or not options.check_paths:
        return mismatches
    return _verify_paths(diags, checks, lids, step)


def _verify_paths(
    diags: DiagRunner, checks: Sequence[PortCheck], lids: dict[int, int | None], step: PushStep
) -> list[str]:
    """Per partition: full member → non-member must have no path; full → member must."""
    mismatches = []
    for pkey in sorted({c.pkey for c in checks}):
        mine = [c for c in checks if c.pkey == pkey]
        full = [c.guid for c in mine if c.membership == "full"]
        members = [c.guid for c in mine if c.membership is not None]
        outsiders = [c.guid for c in mine if c.membership is None]
        if not full:
            continue
        src = lids[full[0]]
        assert src is not None
        pairs = []
        if outsiders:
            pairs.append((outsiders[0], False))
        others = [g for g in members if g != full[0]]
        if others:
            pairs.append((others[0], True))
        for guid, expect in pairs:
            dst = lids[guid]
            assert dst is not None
            found = diags.path(src, dst, pkey=pkey).found
            step.log.append(
                f"saquery path {format_guid(full[0])} → {format_guid(guid)} in {pkey:#06x}: "
                f"{'found' if found else 'none'}"
            )
            if found != expect:
                mismatches.append(
                    f"path {format_guid(full[0])} → {format_guid(guid)} in P_Key {pkey:#06x}: "
                    f"expected {'a path' if expect else 'no path'}"
                )
    return mismatches


def push_partitions(
    target: PushTarget, partitions: Sequence[Partition], options: PushOptions | None = None
) -> PushResult:
    """Apply ``partitions`` (the complete desired set) to ``target`` and prove it on the wire."""
    options = options or PushOptions()
    started = time.monotonic()
    steps = _Steps()
    store = target.artefacts

    def finish(outcome: str, **kw: object) -> PushResult:
        return PushResult(
            outcome, steps.steps, duration_s=round(time.monotonic() - started, 3), **kw
        )  # type: ignore[arg-type]

    t = time.monotonic()
    step = steps.run("render")
    try:
        text = render_partitions(partitions, include_default=options.include_default)
    except ValueError as exc:
        step.status, step.log = "failed", [str(exc)]
        problems = [LintProblem(FILENAME, None, "render", str(exc))]
        return finish("refused", problems=problems)
    step.status, step.duration_s = "ok", time.monotonic() - t

    t = time.monotonic()
    step = steps.run("lint")
    artefact = Artefact("partitions", FILENAME, text)
    problems = artefact.lint()
    step.duration_s = time.monotonic() - t
    if problems:
        step.status, step.log = "failed", [str(p) for p in problems]
        return finish("refused", problems=problems)
    step.status = "ok"
    lkg_text = store.read_lkg(FILENAME)
    previous = parse_partitions(lkg_text, require_default=False) if lkg_text else []
    # A live file that is not the last known good was swapped by a push that never finished
    # (a worker killed between swap and SIGHUP): OpenSM may never have read it, so reload it
    # even though this swap finds nothing to write.
    interrupted = store.read(FILENAME) != lkg_text

    t = time.monotonic()
    step = steps.run("swap")
    try:
        swap = store.swap([artefact])
    except ArtefactRejected as exc:  # defence in depth: swap lints again
        step.status, step.log = "failed", [str(p) for p in exc.problems]
        return finish("refused", problems=exc.problems)
    step.status, step.duration_s = "ok", time.monotonic() - t
    step.log.append("replaced " + FILENAME if swap.changed else "unchanged: nothing to write")

    t = time.monotonic()
    step = steps.run("reload")
    reloaded = bool(swap.changed) or interrupted
    if reloaded:
        target.reload()
        step.status = "ok"
        step.log.append("SIGHUP sent" + ("" if swap.changed else " (unfinished earlier push)"))
    else:
        step.status = "skipped"
    step.duration_s = time.monotonic() - t

    desired = parse_partitions(text, require_default=options.include_default)
    diags = target.diags(timeout=options.diag_timeout)
    t = time.monotonic()
    step = steps.run("verify")
    mismatches = _verify(diags, desired, previous, options, step, settle=reloaded)
    step.duration_s = time.monotonic() - t
    if not mismatches:
        step.status = "ok"
        store.mark_good([FILENAME])
        return finish("verified" if reloaded else "unchanged")
    step.status = "failed"
    step.log += mismatches

    t = time.monotonic()
    step = steps.run("rollback")
    restored = store.rollback()
    step.log.append(f"restored {', '.join(restored) or 'nothing (no change)'}")
    if restored:
        target.reload()
    rollback_mismatches = _verify(diags, previous, desired, options, step)
    step.duration_s = time.monotonic() - t
    step.status = "ok" if not rollback_mismatches else "failed"
    step.log += rollback_mismatches
    outcome = "rolled_back" if not rollback_mismatches else "rollback_failed"
    return finish(outcome, mismatches=mismatches + rollback_mismatches)
