"""The partition push engine: render → lint → atomic swap → SIGHUP → verify on the ports → rollback.

This is what the Celery pipeline calls for an OpenSM-driven fabric (the lab included). It is a
plain function over a small :class:`PushTarget` protocol, so it runs the same against a lab, a
local OpenSM host, or a test double. Every step is idempotent: pushing the same set twice swaps
nothing the second time and only re-verifies.

Verification reads the fabric, never OpenSM's own view: the P_Key table of every explicit
member port (the top bit must match full/limited), of a sample of non-member ports and of ports
that just left a partition (the key must be absent), then ``saquery`` PathRecords restricted to
the P_Key (a member→non-member path must not exist, a full member→member path must).

How the tables are read: one batch of SubnGet(P_KeyTable) per polling round through the
long-lived MAD helper (:class:`console.fabric.diags.mad.MadSession`, ~15 ms for 136 ports on
the 2,048-GPU lab), or, where the helper cannot start (no libibmad), one ``smpquery pkeys``
process per port, ``parallel`` at a time. Ports are addressed by LID: the GUID → LID map of the
last discovery of this fabric is reused (or the lab's, written when its subnet came up); before
a push trusts it, NodeInfo through every checked LID must answer with the expected port GUID,
and a GUID the map does not know or a LID that answers for another port means a fresh
``ibnetdiscover``. Without the helper every push discovers, as before.

When a check is trusted: an "absent" check passes trivially until OpenSM has acted on the
SIGHUP, so one early read proves nothing. A clean read counts only when it started after OpenSM
ended a heavy sweep that began after the SIGHUP; targets that can tell (``sweep_mark()`` /
``swept_since(mark)``: the lab reads OpenSM's flushed log) are waited for, others get a second
full read ``settle_s`` after the first clean one, as before.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from console.fabric.diags import mad as mad_helper
from console.fabric.diags.mad import MadError, MadSession, MadUnavailable
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
    """What the engine needs from an OpenSM host: its files, a reload, and diags.

    Optional, looked up with ``getattr``: ``sweep_mark() -> object | None`` and
    ``swept_since(mark) -> bool`` (did OpenSM end a heavy sweep after the mark, taken before the
    reload?) and ``port_lids() -> {port GUID: (LID, port)}`` (a hint of the HCA LIDs).
    """

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
    # After a change a clean read counts only once OpenSM has acted on the SIGHUP: an "absent"
    # check passes trivially until then. Targets that report the end of OpenSM's sweep are
    # waited for; for the others the checks must hold on two reads this far apart.
    settle_s: float = 0.5
    # Read P_Key tables through the long-lived MAD helper (False: smpquery processes only).
    use_mad: bool = True


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
    return sorted(checks.values(), key=lambda c: (c.pkey, c.guid))


# GUID → (LID, port) of the HCA ports of each fabric (by DiagEnv), from its last discovery.
_LID_CACHE: OrderedDict[tuple, dict[int, tuple[int, int]]] = OrderedDict()
_LID_CACHE_SIZE = 16
_LID_CACHE_LOCK = threading.Lock()


def _cached_lids(key: tuple) -> dict[int, tuple[int, int]] | None:
    with _LID_CACHE_LOCK:
        lids = _LID_CACHE.get(key)
        if lids is not None:
            _LID_CACHE.move_to_end(key)
        return lids


def _cache_lids(key: tuple, lids: dict[int, tuple[int, int]] | None) -> None:
    with _LID_CACHE_LOCK:
        if lids is None:
            _LID_CACHE.pop(key, None)
            return
        _LID_CACHE[key] = lids
        _LID_CACHE.move_to_end(key)
        while len(_LID_CACHE) > _LID_CACHE_SIZE:
            _LID_CACHE.popitem(last=False)


class _Sweep:
    """Did OpenSM end a heavy sweep after the reload? (None: the target cannot tell.)"""

    def __init__(self, target: PushTarget) -> None:
        self.target = target
        mark = getattr(target, "sweep_mark", None)
        self.mark = mark() if callable(mark) else None

    @property
    def known(self) -> bool:
        return self.mark is not None and callable(getattr(self.target, "swept_since", None))

    def done(self) -> bool:
        return self.known and bool(self.target.swept_since(self.mark))  # type: ignore[attr-defined]


class _Ports:
    """Reads P_Key tables by port GUID: LID map, MAD helper batch or smpquery processes."""

    def __init__(self, target: PushTarget, diags: DiagRunner, options: PushOptions) -> None:
        self.target = target
        self.diags = diags
        self.options = options
        env = getattr(diags, "env", None)
        self.key = mad_helper.env_key(env) if env is not None else None
        self.mad: MadSession | None = None
        if options.use_mad and env is not None:
            self.mad = mad_helper.shared_session(env, timeout=options.diag_timeout)
        self.lids: dict[int, tuple[int, int]] = {}
        self.source = ""
        self.blocks: dict[int, int] = {}  # P_Key table blocks to read per GUID (PartitionCap)
        self.validated: set[int] = set()

    # -- LIDs --------------------------------------------------------------------------------

    def load(self, step: PushStep) -> None:
        """The GUID → LID map: cached, the target's hint, or a fresh ibnetdiscover."""
        if self.mad is not None and self.key is not None:
            cached = _cached_lids(self.key)
            if cached:
                self.lids, self.source = cached, "cached"
                return
            hint = getattr(self.target, "port_lids", None)
            lids = hint() if callable(hint) else None
            if lids:
                self.lids, self.source = dict(lids), "lab"
                return
        self.discover(step)

    def discover(self, step: PushStep) -> None:
        started = time.monotonic()
        topo = self.diags.ibnetdiscover()
        self.lids = {
            guid: (topo.nodes[nid].lid, port)
            for (nid, port), guid in topo.port_guids.items()
            if not topo.nodes[nid].is_switch and topo.nodes[nid].lid is not None
        }
        self.source = "ibnetdiscover"
        self.validated.clear()
        self.blocks.clear()
        if self.key is not None:
            _cache_lids(self.key, self.lids)
        step.log.append(f"ibnetdiscover: {len(self.lids)} HCA ports in {time.monotonic() - started:.2f}s")

    def validate(self, guids: Iterable[int], step: PushStep) -> tuple[list[int], list[int]]:
        """NodeInfo through each LID must name the expected port GUID; also learns each port's
        P_Key table size. Returns (wrong, unchecked): LIDs that answer for another port, and
        ports not confirmed (no answer, helper error, no helper: the map is then fresh from
        ibnetdiscover, as every push did before the helper); those are read with smpquery."""
        todo = sorted(g for g in set(guids) if g in self.lids and g not in self.validated)
        if self.mad is None or not todo:
            return [], todo
        try:
            infos = self.mad.nodeinfo([self.lids[g][0] for g in todo], timeout=self.options.diag_timeout)
        except MadUnavailable as exc:
            self._give_up_mad(step, exc)
            return [], todo
        except MadError as exc:
            step.log.append(f"MAD helper: {exc}")
            return [], todo
        wrong, unchecked = [], []
        for guid, info in zip(todo, infos, strict=True):
            if info is None:
                unchecked.append(guid)
            elif int(info.get("port_guid", -1)) != guid:
                wrong.append(guid)
            else:
                self.validated.add(guid)
                cap = int(info.get("partition_cap") or 32)
                self.blocks[guid] = max(1, (cap + 31) // 32)
        return wrong, unchecked

    def _give_up_mad(self, step: PushStep, exc: Exception) -> None:
        step.log.append(f"MAD helper unavailable, reading with smpquery: {exc}")
        self.mad = None

    # -- P_Key tables ------------------------------------------------------------------------

    def read(self, guids: Sequence[int], step: PushStep) -> dict[int, dict[int, str] | str]:
        """Membership by P_Key of each port, or why it could not be read this round."""
        if self.mad is not None:
            mad_guids = [g for g in guids if g in self.validated]
            out: dict[int, dict[int, str] | str] = {}
            try:
                tables = self.mad.pkeys(
                    [self.lids[g] for g in mad_guids],
                    blocks=[self.blocks.get(g, 1) for g in mad_guids],
                    timeout=self.options.diag_timeout,
                )
                for guid, table in zip(mad_guids, tables, strict=True):
                    out[guid] = table.pkeys() if table is not None else "no P_Key table answer"
            except MadUnavailable as exc:
                self._give_up_mad(step, exc)
                return self._read_processes(guids)
            except MadError as exc:  # the session restarts its helper on the next request
                out = dict.fromkeys(mad_guids, f"MAD helper: {exc}")
            rest = [g for g in guids if g not in out]
            if rest:  # no NodeInfo answer: the process path finds the table size itself
                out.update(self._read_processes(rest))
            return out
        return self._read_processes(guids)

    def _read_processes(self, guids: Sequence[int]) -> dict[int, dict[int, str] | str]:
        def read(guid: int) -> tuple[int, dict[int, str] | str]:
            try:
                lid = self.lids[guid][0]
                return guid, self.diags.pkeys(lid, timeout=self.options.diag_timeout).pkeys()
            except DiagError as exc:  # transient while OpenSM re-sweeps: poll again
                return guid, str(exc)

        with ThreadPoolExecutor(max_workers=max(1, self.options.parallel)) as pool:
            return dict(pool.map(read, guids))


def _verify(
    target: PushTarget,
    diags: DiagRunner,
    desired: Sequence[Partition],
    previous: Sequence[Partition],
    options: PushOptions,
    step: PushStep,
    *,
    sweep: _Sweep | None = None,
) -> list[str]:
    """Poll the ports until every check holds or time runs out; returns the mismatches.

    ``sweep`` (after a reload): a clean read must have started after OpenSM ended a heavy sweep
    that followed the reload; without a sweep signal, a second full read ``settle_s`` later.
    """
    deadline = time.monotonic() + options.verify_timeout
    head = len(step.log)
    ports = _Ports(target, diags, options)
    ports.load(step)
    checks = expected_checks(desired, previous, list(ports.lids), options)
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
            checks = expected_checks(desired, previous, list(ports.lids), options)
            wanted = {c.guid for c in checks}
    # After a fresh discovery a LID that answers for another port means the fabric changed
    # under the push; a port that did not answer NodeInfo is read with smpquery.
    wrong, _ = ports.validate(wanted, step)
    step.log.insert(head, f"{len(checks)} port checks on {len(wanted)} ports")
    step.log.append(
        f"LIDs: {ports.source}; P_Key tables via " + ("the MAD helper" if ports.mad is not None else "smpquery")
    )
    mismatches = [
        f"{format_guid(c.guid)}: not on the fabric ({c.why}, P_Key {c.pkey:#06x})"
        for c in checks
        if c.membership is not None and ports.lids.get(c.guid) is None
    ]
    mismatches += [f"{format_guid(g)}: LID {ports.lids[g][0]} answers for another port" for g in sorted(wrong)]
    if mismatches:
        return mismatches
    everything = [c for c in checks if ports.lids.get(c.guid) is not None]
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
                    return [
                        "OpenSM logged no end of sweep within "
                        f"{options.verify_timeout:.0f}s of the reload: cannot confirm the ports"
                    ]
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
    step.log.append(f"{rounds} read round(s)")
    mismatches = [
        f"{format_guid(c.guid)} P_Key {c.pkey:#06x}: expected "
        f"{c.membership or 'absent'} ({c.why}), {last.get(c.guid, 'unread')}"
        for c in pending
    ]
    if mismatches or not options.check_paths:
        return mismatches
    lids = {g: lp[0] for g, lp in ports.lids.items()}
    return _verify_paths(diags, checks, lids, step, parallel=options.parallel)


def _verify_paths(
    diags: DiagRunner,
    checks: Sequence[PortCheck],
    lids: dict[int, int],
    step: PushStep,
    *,
    parallel: int = 4,
) -> list[str]:
    """Per partition: full member → non-member must have no path; full → member must.

    The few ``saquery`` calls run side by side (each with the runner's timeout)."""
    queries: list[tuple[int, int, int, bool]] = []  # (pkey, src guid, dst guid, expect a path)
    for pkey in sorted({c.pkey for c in checks}):
        mine = [c for c in checks if c.pkey == pkey and c.guid in lids]
        full = [c.guid for c in mine if c.membership == "full"]
        members = [c.guid for c in mine if c.membership is not None]
        outsiders = [c.guid for c in mine if c.membership is None]
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


def push_partitions(
    target: PushTarget, partitions: Sequence[Partition], options: PushOptions | None = None
) -> PushResult:
    """Apply ``partitions`` (the complete desired set) to ``target`` and prove it on the wire."""
    options = options or PushOptions()
    started = time.monotonic()
    steps = _Steps()
    store = target.artefacts

    def finish(outcome: str, **kw: object) -> PushResult:
        return PushResult(outcome, steps.steps, duration_s=round(time.monotonic() - started, 3), **kw)  # type: ignore[arg-type]

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
    sweep = None
    if reloaded:
        sweep = _Sweep(target)  # marked before the SIGHUP
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
    mismatches = _verify(target, diags, desired, previous, options, step, sweep=sweep)
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
        sweep = _Sweep(target)
        target.reload()
    rollback_mismatches = _verify(target, diags, previous, desired, options, step, sweep=sweep)
    step.duration_s = time.monotonic() - t
    step.status = "ok" if not rollback_mismatches else "failed"
    step.log += rollback_mismatches
    outcome = "rolled_back" if not rollback_mismatches else "rollback_failed"
    return finish(outcome, mismatches=mismatches + rollback_mismatches)
