"""Fabric validation (issue 35): the whole suite over a fabric, as a job a worker runs.

One run reads the wire through the fabric's SM host (its agent; an ``opensm`` fabric's host
here): a discovery (whose own tests — GUIDs, LIDs, link rates, the SMs' states — and design
comparison it keeps), the switches' forwarding tables (``routes``), every linked switch port's
error counters (``port-errors``), the console's verification of the P_Key tables it applied
(``pkeys``), the SM hosts' files and routing engine (``sm-config``), the cabling against the
design (``cabling``) and, where the SM host records mlxlink's readings, the transceivers'
temperatures and BERs (``phy``). The tests themselves are plain Python (:mod:`designer.imports.health`,
:mod:`designer.imports.health_wire`); this module gathers their inputs, times each test and
stores the verdicts on a :class:`~console.telemetry.models.ValidationRun`.

At most one run per fabric is queued or running: a second request joins it. Asked for by the
API (``POST /api/fabrics/{id}/validation/``), the fabric page, ``manage.py fabric validate`` and
the schedule (``FABRIC_VALIDATE_S``).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from functools import partial
from typing import Any

from celery import current_app as celery_app
from django.db import IntegrityError, transaction
from django.utils import timezone

from console.fabric import isolation
from console.fabric.agents.services import out_of_step
from console.fabric.changes.desired import applied_of
from console.fabric.changes.requests import on_the_wire
from console.fabric.discovery import jobs
from console.fabric.discovery.services import discover_with
from console.fabric.discovery.sources import DISCOVERY_TIMEOUT, local_host
from console.fabric.enqueue import PUBLISH_OPTIONS
from console.fabric.models import DiscoveryRun, Fabric
from console.telemetry import agent_reader
from console.telemetry.agent_ops import phy_on
from console.telemetry.core import PortReading
from console.telemetry.models import FabricEvent, ValidationRun, failed_codes
from console.telemetry.readers import CounterReader, MadReader, PortKey, ReaderError, read_lfts
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from designer.imports import health_wire, phy
from designer.imports.health import Verdict, label
from designer.imports.model import Discovery

VALIDATE = "telemetry.validate_fabric"
#: A queued or running run older than this lost its worker: the next request fails it.
STALE_AFTER_S = 3 * DISCOVERY_TIMEOUT + 120


def active(fabric: Fabric) -> ValidationRun | None:
    return ValidationRun.objects.filter(fabric=fabric, state__in=ValidationRun.ACTIVE).first()


def start(fabric: Fabric, *, actor: Actor, trigger: str = "api", publish_it: bool = True) -> tuple[ValidationRun, bool]:
    """Queue a validation of ``fabric`` (audited; sent to a worker unless ``publish_it`` is
    False: the caller runs it), or join the one queued or running: ``(run, created)``."""
    limit = timezone.now() - dt.timedelta(seconds=STALE_AFTER_S)
    ValidationRun.objects.filter(fabric=fabric, state__in=ValidationRun.ACTIVE, created_at__lt=limit).update(
        state=ValidationRun.State.FAILED, error="no worker finished it (a worker lost, or none running)"
    )
    for _ in range(3):
        try:
            with transaction.atomic():
                row = ValidationRun.objects.create(fabric=fabric, requested_by=asdict(actor), trigger=trigger)
                audit.record(actor, "fabric.validate_requested", fabric, after={"validation": row.pk})
                if publish_it:
                    transaction.on_commit(partial(publish, row.pk, fabric.pk))
            return row, True
        except IntegrityError:
            joined = active(fabric)
            if joined is not None:
                return joined, False
    raise ConsoleError(f"could not queue a validation of {fabric.name}: try again")


def publish(run_id: int, fabric_id: int) -> None:
    """Send the run to a worker (the fabric's site queue: :mod:`console.fabric.routing`)."""
    celery_app.send_task(VALIDATE, kwargs={"run_id": run_id, "fabric_id": fabric_id}, **PUBLISH_OPTIONS)


def run(run_id: int) -> ValidationRun | None:
    """The worker's side: run every test, saying each step; done with the verdicts, or failed
    with the reason. A run already taken or finished is left alone."""
    taken = ValidationRun.objects.filter(pk=run_id, state=ValidationRun.State.QUEUED).update(
        state=ValidationRun.State.RUNNING, started_at=timezone.now(), step="starting"
    )
    row = ValidationRun.objects.select_related("fabric__revision__design").filter(pk=run_id).first()
    if not taken or row is None:
        return row

    def progress(step: str, _state: str = "running") -> None:
        ValidationRun.objects.filter(pk=run_id, state=ValidationRun.State.RUNNING).update(step=step[:200])

    started = time.monotonic()
    try:
        discovery, verdicts = suite(row.fabric, actor=Actor(**row.requested_by), progress=progress)
    except ConsoleError as exc:
        _finish(row, state=ValidationRun.State.FAILED, error=exc.detail, started=started)
    except Exception as exc:  # recorded for the person waiting, then the worker's log has it
        _finish(row, state=ValidationRun.State.FAILED, error=f"{type(exc).__name__}: {exc}", started=started)
        raise
    else:
        _finish(row, state=ValidationRun.State.DONE, started=started, verdicts=verdicts, discovery=discovery)
    row.refresh_from_db()
    return row


def _finish(
    row: ValidationRun,
    *,
    state: str,
    started: float,
    error: str = "",
    verdicts: list[dict[str, Any]] | None = None,
    discovery: DiscoveryRun | None = None,
) -> None:
    ok = None if verdicts is None else not failed_codes(verdicts)
    with transaction.atomic():
        ValidationRun.objects.filter(pk=row.pk).update(
            state=state,
            error=error[:4000],
            step="",
            ok=ok,
            verdicts=verdicts or [],
            discovery=discovery,
            finished_at=timezone.now(),
            duration_s=round(time.monotonic() - started, 3),
        )
        failed = failed_codes(verdicts or [])
        audit.record(
            Actor.system("task:telemetry.validate_fabric"),
            "fabric.validated",
            row.fabric,
            after={"validation": row.pk, "state": state, "ok": ok, "failed": failed, "error": error[:300]},
        )


def suite(
    fabric: Fabric, *, actor: Actor, progress: Callable[[str, str], None]
) -> tuple[DiscoveryRun, list[dict[str, Any]]]:
    """Every test over ``fabric`` now: the discovery it made, and the verdicts (each timed)."""
    started = time.monotonic()
    found, disc = discover_with(fabric, actor=actor, progress=progress)
    per_test = (time.monotonic() - started) / max(1, len(found.summary.get("validation", [])))
    verdicts = [{**v, "seconds": round(per_test, 3)} for v in found.summary.get("validation", [])]
    reader = _reader(fabric)
    try:
        progress("port states and error counters", "running")
        began = time.monotonic()
        readings = _read_ports(disc, reader)
        read_s = time.monotonic() - began
        if not isinstance(readings, str):  # the duplicates one discovery hides (its twin merged)
            states = {key: r.state for key, r in readings.items()}
            wire_guids = {**health_wire.guids_on_the_wire(disc, states).as_dict(), "seconds": round(read_s, 3)}
            verdicts = [wire_guids if v["code"] == "guids" else v for v in verdicts]
        checks: list[tuple[str, Callable[[], Verdict]]] = [
            ("forwarding tables", lambda: _routes(fabric, disc, reader)),
            ("error counters", lambda: _port_errors(fabric, disc, readings)),
            ("P_Key tables", lambda: _pkeys(fabric)),
            ("subnet managers' configuration", lambda: _sm_config(fabric, found)),
            ("cabling against the design", lambda: health_wire.cabling(found.compare)),
            ("transceiver temperatures and BER", lambda: _phy(fabric, disc)),
        ]
        for step, check in checks:
            progress(step, "running")
            began = time.monotonic()
            verdict = check()
            verdicts.append({**verdict.as_dict(), "seconds": round(time.monotonic() - began, 3)})
    finally:
        if reader is not None:
            reader.close()
    return found, verdicts


def _reader(fabric: Fabric) -> CounterReader | None:
    """What reads the fabric's tables and counters: its agent, or this host for an ``opensm``
    fabric (None: neither)."""
    if fabric.through_agent:
        return agent_reader.AgentReader(fabric)
    if fabric.driver == Fabric.Driver.OPENSM:
        mad = MadReader(local_host(fabric).diags(timeout=30).env)
        try:
            mad._start()
        except ReaderError:
            return None
        return mad
    return None


NEEDS_WIRE = "needs the fabric's SM host (an agent, or an opensm fabric's host): this driver has none"


def _routes(fabric: Fabric, disc: Discovery, wire: CounterReader | None) -> Verdict:
    title = "Every host pair has a route (no missing entry, dead end or loop)"
    if wire is None:
        return Verdict.skip("routes", title, NEEDS_WIRE)
    switches = [n for n in disc.switches if n.lid]
    top = max((p.lid or 0 for n in disc.nodes for p in n.ports), default=0)
    top = max([top, *(n.lid or 0 for n in switches)])
    try:
        tables = read_lfts(wire, [int(n.lid or 0) for n in switches], top)
    except ReaderError as exc:
        return Verdict.skip("routes", title, f"the forwarding tables could not be read: {exc}")
    lfts = {n.node_id: t for n, t in zip(switches, tables, strict=False) if t is not None}
    return health_wire.routes(disc, lfts)


def _read_ports(disc: Discovery, wire: CounterReader | None) -> dict[PortKey, PortReading] | str:
    """Every switch port's state and error counters (all ports 1..N: a port up with nothing
    discovered behind it matters), or why they could not be read."""
    if wire is None:
        return NEEDS_WIRE
    ports = {n.node_id: list(range(1, n.nports + 1)) for n in disc.switches if n.lid}
    lids = {n.node_id: int(n.lid or 0) for n in disc.switches if n.lid}
    try:
        return wire.read(ports, lids)
    except ReaderError as exc:
        return f"the ports could not be read: {exc}"


def _port_errors(fabric: Fabric, disc: Discovery, readings: dict[PortKey, PortReading] | str) -> Verdict:
    if isinstance(readings, str):
        return Verdict.skip("port-errors", "No port's error counters above the thresholds", readings)
    names = {n.node_id: label(n) for n in disc.switches}
    errors = {(names.get(sw, sw), port): r.errors for (sw, port), r in readings.items()}
    return health_wire.port_errors(errors, _thresholds(fabric))


def _phy(fabric: Fabric, disc: Discovery) -> Verdict:
    """The transceiver temperatures and BERs recorded on the SM host (mlxlink's output per port in
    its PHY directory), each port named as the discovery knows it."""
    if fabric.through_agent:
        try:
            got = agent_reader.phy(fabric)
        except ReaderError as exc:
            return Verdict.skip("phy", phy.TITLE, f"the PHY readings could not be read: {exc}")
    elif fabric.driver == Fabric.Driver.OPENSM:
        got = phy_on(local_host(fabric))
    else:
        return Verdict.skip("phy", phy.TITLE, NEEDS_WIRE)
    found = {key: phy.PhyReading.from_json(doc) for key, doc in (got.get("readings") or {}).items()}
    unread = [str(u) for u in got.get("unread") or []]
    names: dict[str, str] = {}
    for node in disc.nodes:
        if node.lid:
            names.setdefault(f"lid-{node.lid}", label(node))
        if node.guid:
            names.setdefault(phy.device_key(f"{node.guid:016x}"), label(node))
        for port in node.ports:
            if port.lid:
                names.setdefault(f"lid-{port.lid}", label(node))
            if port.port_guid:
                names.setdefault(phy.device_key(f"{port.port_guid:016x}"), label(node))
    named = {}
    for key, reading in found.items():
        device, _, port = key.rpartition("/")
        named[f"{names.get(device, device)} port {port}"] = reading
    return phy.phy(named, unread)


def _thresholds(fabric: Fabric) -> Mapping[str, int]:
    """The fabric's ``error_thresholds`` (config: an ibqueryerrors thresholds file's text), else
    the suggested values."""
    text = str(fabric.config.get("error_thresholds") or "")
    try:
        return health_wire.parse_thresholds(text)
    except ValueError as exc:
        raise ConsoleError(f"error_thresholds of {fabric.name}: {exc}") from exc


def _pkeys(fabric: Fabric) -> Verdict:
    """The console's verification of what it applied, read now, and what the latest isolation
    audit (console.fabric.isolation, on its schedule and after every push) found against the
    isolation rules."""
    title = "P_Key tables carry the partitions the console applied"
    applied = applied_of(fabric)
    if applied is None:
        return Verdict.skip("pkeys", title, "the console has applied nothing to this fabric yet")
    mismatches = on_the_wire(fabric, applied)
    if mismatches is None:
        return Verdict.skip("pkeys", title, "the ports could not be asked (the SM host or its agent did not answer)")
    audit = isolation.latest(fabric)
    if audit is not None:
        when = audit.checked_at.strftime("%H:%M:%S")
        found = [f for f in audit.findings if f.get("kind") != "adopted"]
        mismatches = [*mismatches, *(f"isolation audit at {when}: {f.get('message', f)}" for f in found)]
    return health_wire.pkeys(mismatches)


def _sm_config(fabric: Fabric, found: DiscoveryRun) -> Verdict:
    behind = [f"{name}: runs files or a priority other than the console's" for name in out_of_step(fabric)]
    drift = FabricEvent.objects.filter(fabric=fabric, kind=FabricEvent.Kind.CONFIG_DRIFT).unresolved()
    behind += [f"{event.subject}: {event.message}" for event in drift.order_by("subject")]
    return health_wire.sm_config(behind, found.routing)


def validate_now(fabric_id: int, *, actor: Actor) -> dict[str, Any]:
    """Run the suite in this process (``manage.py fabric validate``), or wait for the run already
    queued or running; the run as :func:`run_json` answers it."""
    fabric = Fabric.objects.get(pk=fabric_id)
    row, created = start(fabric, actor=actor, trigger="cli", publish_it=False)
    done = run(row.pk) if created else jobs.wait(row, STALE_AFTER_S)
    return run_json(done or row)


def run_json(row: ValidationRun) -> dict[str, Any]:
    """A run as the API answers it (``verdicts`` as stored, ``failed``: the codes that failed)."""
    return {
        "id": row.pk,
        "fabric": row.fabric_id,
        "state": row.state,
        "step": row.step,
        "trigger": row.trigger,
        "error": row.error,
        "ok": row.ok,
        "failed": row.failed,
        "verdicts": row.verdicts,
        "discovery_id": row.discovery_id,
        "created_at": row.created_at.isoformat(),
        "started_at": row.started_at.isoformat() if row.started_at else None,
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
        "duration_s": row.duration_s,
        "url": f"/api/fabrics/{row.fabric_id}/validation/{row.pk}/",
    }
