"""The partition push engine: render → lint → atomic swap → SIGHUP → verify on the ports → rollback.

This is what the Celery pipeline calls for an OpenSM-driven fabric (the lab included). It is a
plain function over a small :class:`PushTarget` protocol, so it runs the same against a lab, a
local OpenSM host, or a test double. Every step is idempotent: pushing the same set twice swaps
nothing the second time and only re-verifies.

Verification (:mod:`console.fabric.opensm.verify`) reads the fabric, never OpenSM's own view;
the P_Key tables are read through the MAD helper or ``smpquery``
(:mod:`console.fabric.opensm.pkey_tables`). The engine's types live in
:mod:`console.fabric.opensm.push_types`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from console.fabric.opensm.files import Artefact
from console.fabric.opensm.lint import ArtefactRejected, LintProblem
from console.fabric.opensm.partitions import Partition
from console.fabric.opensm.partitions_file import (
    OperatorPartition,
    hand_written,
    parse_file,
    render_file,
    with_operator,
)
from console.fabric.opensm.pkey_tables import Sweep
from console.fabric.opensm.push_types import PushOptions, PushResult, PushStep, PushTarget
from console.fabric.opensm.verify import verify_partitions

__all__ = ["FILENAME", "PushOptions", "PushResult", "PushStep", "PushTarget", "push_partitions"]

FILENAME = "partitions.conf"


class _Steps:
    def __init__(self) -> None:
        self.steps: list[PushStep] = []

    def run(self, name: str) -> PushStep:
        step = PushStep(name, status="running")
        self.steps.append(step)
        return step


def push_partitions(
    target: PushTarget,
    partitions: Sequence[Partition],
    options: PushOptions | None = None,
    *,
    operator: Sequence[OperatorPartition] = (),
    dropped: Sequence[int] = (),
) -> PushResult:
    """Apply ``partitions`` (the complete desired set of the console's own) to ``target`` and
    prove it on the wire. ``operator``: partitions the console keeps as written; ``dropped``:
    P_Keys of operator partitions an operator deleted in the console. Any other partition the
    live file holds that the console did not write is kept too, and reported
    (:attr:`PushResult.kept`)."""
    options = options or PushOptions()
    started = time.monotonic()
    steps = _Steps()
    store = target.artefacts
    kept: list[OperatorPartition] = []
    text: str | None = None

    def finish(outcome: str, **kw: object) -> PushResult:
        return PushResult(
            outcome,
            steps.steps,
            duration_s=round(time.monotonic() - started, 3),
            kept=kept,
            written=text,
            **kw,  # type: ignore[arg-type]
        )

    t = time.monotonic()
    step = steps.run("render")
    try:
        known = {p.pkey for p in partitions} | {p.pkey for p in operator} | set(dropped)
        kept = hand_written(store.read(FILENAME), store.read_lkg(FILENAME), known)
        for found in kept:
            step.log.append(f"kept {found.name} ({found.pkey:#06x}): written on the SM host, not by the console")
        text = render_file(partitions, include_default=options.include_default, operator=[*operator, *kept])
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
    previous = parse_file(lkg_text, require_default=False) if lkg_text else []
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
        sweep = Sweep(target)  # marked before the SIGHUP
        target.reload()
        step.status = "ok"
        step.log.append("SIGHUP sent" + ("" if swap.changed else " (unfinished earlier push)"))
    else:
        step.status = "skipped"
    step.duration_s = time.monotonic() - t

    if options.standby:  # the master programs the ports; its push verifies them
        store.mark_good([FILENAME])
        return finish("staged")
    desired = parse_file(text, require_default=options.include_default)
    diags = target.diags(timeout=options.diag_timeout)
    t = time.monotonic()
    step = steps.run("verify")
    mismatches = verify_partitions(target, diags, desired, previous, options, step, sweep=sweep)
    step.duration_s = time.monotonic() - t
    if not mismatches:
        step.status = "ok"
        store.mark_good([FILENAME])
        return finish("verified" if reloaded else "unchanged")
    step.status = "failed"
    step.log += mismatches

    t = time.monotonic()
    step = steps.run("rollback")
    restored = list(store.rollback())
    if kept and lkg_text is not None:
        # What an operator wrote since the last verified push is not in the last known good:
        # keep it through the rollback too.
        again = store.swap([Artefact("partitions", FILENAME, with_operator(lkg_text, kept))])
        restored += [name for name in again.changed if name not in restored]
        step.log.append(f"kept {', '.join(k.name for k in kept)} (written on the SM host) through the rollback")
    step.log.append(f"restored {', '.join(restored) or 'nothing (no change)'}")
    if restored:
        sweep = Sweep(target)
        target.reload()
    rollback_mismatches = verify_partitions(target, diags, previous, desired, options, step, sweep=sweep)
    step.duration_s = time.monotonic() - t
    step.status = "ok" if not rollback_mismatches else "failed"
    step.log += rollback_mismatches
    outcome = "rolled_back" if not rollback_mismatches else "rollback_failed"
    return finish(outcome, mismatches=mismatches + rollback_mismatches)
