"""The reservation queue: ``start: "asap"`` requests that do not fit now wait, in order, and are
placed automatically when capacity frees.

Submit (:func:`reserve_asap`) runs the reserve path; a request it cannot place now is stored as
``queued`` instead of rejected, unless it can never be placed (no quota, larger than the quota's
limit or than the pool). A queue pass (:func:`queue_pass`, the Celery task ``scheduling.queue_pass``
published after release, expiry, cancellation, a node returning to service, and run by the
periodic tick as a safety net) runs :func:`scheduling.placement.queue.queue_pass`, the very pass
the replay simulator runs, on the pool's snapshot: it places what fits now, topology-aware and
all-or-nothing, re-checks each tenant's quota at that moment (:class:`QuotaGate`) and gives the
others their ``estimated_start`` (the head: its earliest window; the others: from the pool's
free-from profile around the requests ahead of them, as ``schedule replay``) and
``queue_position``. A placed request goes through :func:`.grant.grant` like a direct reservation.

Locks: every quota row of the pool (primary-key order), then the pool's reservation lock: the
reserve path's order (quota, reservation lock), so two passes, or a pass and a reservation,
serialise instead of deadlocking, and each queued request is placed once. The queued rows
themselves are not locked: every writer of a queued row holds the pool's reservation lock first
(submit through the reserve path, the pass, cancel and release through
:func:`.lifecycle.lock_booked`), so under that lock they stay as read; locking 500 rows
``FOR UPDATE`` wrote each of them on every pass.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import BooleanField, ExpressionWrapper, F, FloatField, Func, Q, QuerySet, TextField
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.models import Principal
from scheduling.models import Pool, Quota, Reservation
from scheduling.placement import Owner, Placement, Rejection
from scheduling.placement.queue import QueueDecision, QueuedJob, waiting_words
from scheduling.placement.queue import queue_pass as run_pass
from scheduling.placement.sites import OnSites, SiteRule
from scheduling.services import notices
from scheduling.services.grant import grant
from scheduling.services.locks import pool_and_overlapping_lock, pool_quotas_for_update
from scheduling.services.pool_rows import reread_under_lock
from scheduling.services.publish import enqueue_queue_pass
from scheduling.services.quotas import peak_usage
from scheduling.services.raw import int_array, prepared_cursor
from scheduling.services.reservations import (
    Decision,
    ReservationRequest,
    Snapshot,
    engine_request,
    explanation,
    priority_rank,
    reserve,
)
from scheduling.services.site_choice import placed_span
from scheduling.services.snapshots import lend
from scheduling.services.topology import NamedTopology

S = Reservation.Status
#: Queued requests given a reservation per pass (an earliest-window search each, booked so that
#: nothing behind may delay them): the head, as ``schedule replay`` does (EASY backfill). The rest
#: get their estimate from the pool's free-from profile (``estimate=True``): a conservative
#: forecast of 500 windows cost seconds per pass on a 16,384-GPU pool with a thousand bookings.
FORECAST_DEPTH = 1
#: Queued jobs kept built (:func:`queued_job`), per process.
MAX_JOBS_CACHED = 20_000
_jobs: dict[tuple[Any, ...], QueuedJob] = {}
#: A queued request asking for SHARP (its pass must hold the locks of the fabric's pools).
SHARP = Q(constraint_params__sharp=True)
#: Rejection codes a queue cannot cure: no quota at all, a class the quota does not allow, or a gang
#: the pool cannot ever hold.
NEVER = {"no_quota", "class_not_allowed", "too_large", "no_eligible_nodes", "invalid"}


def reserve_asap(actor: Actor, principal: Principal, request: ReservationRequest) -> Reservation:
    """Reserve now, or queue the request when it does not fit now (see the module docstring)."""

    def queue_it(reservation: Reservation, snap: Snapshot, decision: Decision, request: ReservationRequest) -> bool:
        return _queue_it(actor, reservation, snap, decision, request)

    pool = Pool.objects.filter(pk=request.pool_id).first()
    patience = request.max_wait if request.max_wait is not None else (pool.default_max_wait if pool else None)
    # With patience it is placed now only if a packed placement fits now; otherwise it waits.
    packed = patience is not None and patience > dt.timedelta(0)
    return reserve(actor, principal, dataclasses.replace(request, asap=True, packed=packed), unplaced=queue_it)


def _queue_it(
    actor: Actor, reservation: Reservation, snap: Snapshot, decision: Decision, request: ReservationRequest
) -> bool:
    quota = decision.quota
    if decision.code in NEVER or quota is None:
        return False
    if decision.gpus > quota.limit_gpus:
        decision.code = "over_quota_limit"
        message = (
            f"{decision.gpus} GPUs can never fit the quota of {quota.limit_gpus} GPUs "
            f"({quota.guaranteed_gpus} guaranteed + {quota.borrow_limit_gpus} borrowable) in this pool"
        )
        decision.result = Rejection("over_quota_limit", message, {"limit_gpus": quota.limit_gpus})
        return False
    pool = reservation.pool
    reservation.status = S.QUEUED
    reservation.gpus = decision.gpus
    reservation.queued_at = snap.now
    reservation.max_wait = request.max_wait if request.max_wait is not None else pool.default_max_wait
    # A pool at several sites: the site it waits for, and why (nearer-later vs farther-now).
    reservation.explanation = {**reservation.explanation, "queue": explanation(decision)}
    reservation.save()
    audit.record(actor, "reservation.queue", reservation, after=audit.snapshot(reservation))
    # Its estimate and position come from a pass over the whole queue, this request included.
    _pass_locked(pool, snap, place=False)
    reservation.refresh_from_db()
    return True


class _SharpQueued(Exception):
    """A SHARP request joined the queue while the pass waited for its (pool-wide) locks."""


def queue_pass(pool_id: int, *, now: dt.datetime | None = None) -> dict[str, int]:
    """Place what fits of the pool's queue, in order; refresh the others' estimates and positions."""
    pool = Pool.objects.select_related("fabric").filter(pk=pool_id).first()
    if pool is None:
        return {"placed": 0, "queued": 0}
    # A queued SHARP request takes aggregation trees the fabric's pools share: lock them all.
    sharp = queued_in(pool).filter(SHARP).exists()
    try:
        return _pass(pool_id, now, sharp)
    except _SharpQueued:  # read before the lock, queued meanwhile: again, fabric-wide
        return _pass(pool_id, now, True)


def _pass(pool_id: int, now: dt.datetime | None, sharp: bool) -> dict[str, int]:
    with transaction.atomic():
        pool_quotas_for_update(pool_id)
        # The pool as it is under the lock (its members), read with the lock's re-read in one statement.
        under_lock: list[Pool] = []
        pool_and_overlapping_lock(pool_id, fabric_wide=sharp, reread=lambda: reread_under_lock(pool_id, under_lock))
        pool = under_lock[-1]
        rows = queued_rows(pool)
        if not sharp and any(r.sharp for r in rows):
            raise _SharpQueued  # rolls back: its locks are given back before the fabric's are taken
        # The clock is read after the locks: waiting for them may take a while.
        with lend(pool, now or timezone.now()) as snap:
            return _pass_locked(pool, snap, place=True, rows=rows)


@dataclass(slots=True)
class QueuedRow:
    """The columns of a queued request the pass reads (no model instance, no JSON decoded: its
    constraint parameters as text, its explanation's patience note and site rule alone; times as
    epoch seconds, durations as seconds: no datetime parsed per row). Each field names the column
    read, in order; :func:`queued_rows` computes ``params``, ``submitted``, ``patience``,
    ``site_rule`` and ``sharp``, and the epochs."""

    pk: int
    tenant_id: int
    priority_class: str
    requested_gpus: int | None
    requested_nodes: int | None
    gpu_model: str
    same_leaf: bool
    max_switch_hops: int | None
    rail_aligned: bool
    params: str
    start: float
    end: float
    max_wait: float | None
    submitted: float
    gpus: int
    estimated_start: float | None
    queue_position: int | None
    patience: str | None
    fabric_id: int
    span_sites: bool
    reason: str  # why it waits, as the last pass wrote it
    site_message: str | None  # its site choice in words (``explanation.site.message``), kept in the reason
    #: The rule of its site choice at submission (``explanation.site.rule``; ``None``: a pool at one site).
    site_rule: str | None
    #: Whether it asks for SHARP (its pass must hold the fabric's pools' locks).
    sharp: bool

    @property
    def whole_pool(self) -> bool:
        """Whether it waits for the whole pool rather than for one site: it may span sites and its
        site choice found no site able to hold it alone (rule ``none``), or made none (the pool
        was at one site). A request that may span but was given a site (e.g. ``nearer_later``:
        the site it waits for frees within its patience) stays pinned to that site, as its
        explanation says."""
        return self.span_sites and self.site_rule in {None, SiteRule.NONE}


#: The columns of :class:`QueuedRow` that are times (epoch seconds) or durations (seconds).
_SECONDS = ("start", "end", "max_wait", "submitted", "estimated_start")


def queued_rows(pool: Pool) -> list[QueuedRow]:
    """The pool's queued requests (primary-key order) as :class:`QueuedRow`."""
    computed: dict[str, Any] = {
        "params": Cast("constraint_params", TextField()),
        "submitted": Coalesce("queued_at", "created_at"),
        "patience": KeyTextTransform("patience", "explanation"),
        "site_rule": KeyTextTransform("rule", KeyTransform("site", "explanation")),
        "site_message": KeyTextTransform("message", KeyTransform("site", "explanation")),
        "sharp": Coalesce(ExpressionWrapper(SHARP, output_field=BooleanField()), False),
    }
    postgres = connection.vendor == "postgresql"
    if postgres:  # seconds from the database: no datetime per row
        computed.update({name: _epoch(computed.get(name, F(name))) for name in _SECONDS})
    columns = [computed.get(f.name, f.name) for f in dataclasses.fields(QueuedRow)]
    rows = queued_in(pool).order_by("pk").values_list(*columns)
    if postgres:  # no column needs a converter: the cursor's rows as they come (a third of the time)
        sql, params = rows.query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [QueuedRow(*row) for row in cursor.fetchall()]
    at = [i for i, f in enumerate(dataclasses.fields(QueuedRow)) if f.name in _SECONDS]
    return [QueuedRow(*_in_seconds(row, at)) for row in rows]


def _in_seconds(row: tuple[Any, ...], at: list[int]) -> list[Any]:
    """The row with its times (datetimes) as epoch seconds and its durations as seconds."""
    values = list(row)
    for i in at:
        value = values[i]
        if isinstance(value, dt.timedelta):
            values[i] = value.total_seconds()
        elif value is not None:
            values[i] = value.timestamp()
    return values


def _pass_locked(pool: Pool, snap: Snapshot, *, place: bool, rows: list[QueuedRow] | None = None) -> dict[str, int]:
    rows = queued_rows(pool) if rows is None else rows
    if not rows:
        return {"placed": 0, "queued": 0}
    by_key = {f"q{r.pk}": r for r in rows}
    site_of = fabric_sites(snap.named) if len(snap.named.site_slugs) > 1 else {}
    # Each waits for the site its choice named (its fabric's), unless it was given the whole pool.
    jobs = [queued_job(r, pool, None if r.whole_pool else site_of.get(r.fabric_id)) for r in rows]
    quotas = {q.tenant_id: q for q in Quota.objects.filter(pool=pool)}
    gate = QuotaGate(quotas, by_key, holding_windows(pool, snap.now, {r.tenant_id for r in rows}))
    decisions = run_pass(snap.engine, jobs, reservations=FORECAST_DEPTH, gate=gate, estimate=True)
    actor = Actor.system("task:scheduling.queue_pass")
    placed = 0
    position = 0
    moved: dict[int, tuple[float | None, int, str, str]] = {}
    behind = False  # a submit's pass found an earlier request placeable now: a real pass follows
    for decision in decisions:
        row = by_key[decision.job.key]
        estimated_start: float | None
        if decision.placed_now and decision.placement is not None:
            if place:
                _place(actor, row.pk, snap, decision.placement, decision, gate.owners[decision.job.key])
                placed += 1
                continue
            behind = True
            estimated_start = snap.now.timestamp()
        else:
            estimated_start = decision.estimated_start
        position += 1
        # Only the rows whose estimate (to the microsecond stored), position, note or reason moved
        # (a pass usually moves few of them).
        why = waiting_words(dataclasses.replace(decision, estimated_start=estimated_start), position)
        why = f"{why}. {row.site_message[0].upper()}{row.site_message[1:]}" if row.site_message else why
        now = (_micros(estimated_start), position, decision.note, why)
        if now != (_micros(row.estimated_start), row.queue_position, row.patience, row.reason):
            moved[row.pk] = (estimated_start, position, decision.note, why)
    _write_moved(moved)
    if behind:
        enqueue_queue_pass(pool.pk)
    return {"placed": placed, "queued": position}


def _micros(epoch: float | None) -> int | None:
    """An epoch to the microsecond, as the database keeps it (``datetime.fromtimestamp`` rounds so)."""
    return None if epoch is None else round(epoch * 1_000_000)


def _write_moved(moved: dict[int, tuple[float | None, int, str, str]]) -> None:
    """Write the new estimates, positions, patience notes (the rest of each explanation kept) and
    reasons (why each waits):
    on PostgreSQL one ``UPDATE … FROM unnest`` setting the note with ``jsonb_set`` (no explanation
    read back, no statement per row: a pass after a release may move hundreds of estimates);
    elsewhere ``bulk_update``."""
    if not moved:
        return
    pks = sorted(moved)
    if connection.vendor == "postgresql":
        with prepared_cursor() as cursor:
            cursor.execute(
                _moved_statement(),
                [
                    int_array(pks),
                    [_when(moved[pk][0]) for pk in pks],
                    int_array(moved[pk][1] for pk in pks),
                    [moved[pk][2] for pk in pks],
                    [moved[pk][3] for pk in pks],
                ],
            )
        return
    updated = []
    for pk, before in Reservation.objects.filter(pk__in=pks).values_list("pk", "explanation"):
        estimated_start, position, note, why = moved[pk]
        row = Reservation(pk=pk, estimated_start=_when(estimated_start), queue_position=position, reason=why)
        row.explanation = {**before, "patience": note}
        updated.append(row)
    fields = ["estimated_start", "queue_position", "explanation", "reason"]
    Reservation.objects.bulk_update(updated, fields, batch_size=500)


@functools.cache
def _moved_statement() -> str:
    table = connection.ops.quote_name(Reservation._meta.db_table)
    return (
        f"UPDATE {table} r SET estimated_start = m.estimated_start, queue_position = m.position,"  # noqa: S608 - ours
        " explanation = jsonb_set(COALESCE(r.explanation, '{}'::jsonb), '{patience}', to_jsonb(m.note)),"
        " reason = m.reason FROM unnest(%s::bigint[], %s::timestamptz[], %s::int[], %s::text[], %s::text[])"
        " AS m(id, estimated_start, position, note, reason) WHERE r.id = m.id"
    )


def _place(actor: Actor, pk: int, snap: Snapshot, placement: Placement, decision: QueueDecision, owner: Owner) -> None:
    # Whole (grant saves and audits it); as read under the pool's reservation lock the pass holds.
    row = Reservation.objects.get(pk=pk)
    waited = snap.now - (row.queued_at or snap.now)
    row.borrowed = owner.borrowed
    kept = {"site": row.explanation["site"]} if "site" in row.explanation else {}
    row.explanation = {
        **kept,
        "queue": {
            "waited_s": round(waited.total_seconds()),
            "position": decision.position,
            "packed": decision.packed,
            "patience": decision.note,
            "leaf_groups": len(placement.leaf_groups),
        },
    }
    row.estimated_start = None
    row.queue_position = None
    row.reason = ""  # it waits no more
    span = placed_span(snap.named, placement) if row.span_sites else None
    if span is not None:  # it spans sites: the inter-site cost of its ring all-reduce
        row.explanation["site"] = {**row.explanation.get("site", {}), "rule": "span", "span": span}
        row.reason = str(span["message"])
    grant(actor, row, snap.named, placement, now=snap.now, action="reservation.place")
    if span is not None:
        row.placement["span"] = span
        Reservation.objects.filter(pk=row.pk).update(placement=row.placement)
    notices.placed(row, round(waited.total_seconds()))


def _when(epoch: float | None) -> dt.datetime | None:
    return None if epoch is None else _at(epoch)


def _at(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


def queued_in(pool: Pool) -> QuerySet[Reservation]:
    """The pool's queued requests (in queue order: submission, then id)."""
    return Reservation.objects.filter(pool=pool, status=S.QUEUED)


def fabric_sites(named: NamedTopology) -> dict[int, int]:
    """Fabric pk → its site index in a multi-site pool's topology."""
    return {fabric: node.site for node, fabric in zip(named.topology.nodes, named.node_fabric, strict=True)}


def queued_job(row: QueuedRow, pool: Pool, site: int | None = None) -> QueuedJob:
    """The engine's view of a queued row (its constraints read back from their columns); built
    once per process for the same inputs (a pass over 500 requests rebuilds none of them).
    ``site``: the site index it waits for in a pool at several sites (its ``fabric``'s)."""
    key = (
        site,
        row.pk,
        pool.pk,
        row.requested_gpus,
        row.requested_nodes,
        row.priority_class,
        row.gpu_model,
        row.same_leaf,
        row.max_switch_hops,
        row.rail_aligned,
        row.params,
        row.start,
        row.end,
        row.max_wait,
        row.submitted,
        row.gpus,
    )
    job = _jobs.get(key)
    if job is None:
        if len(_jobs) >= MAX_JOBS_CACHED:
            _jobs.clear()
        job = _jobs[key] = _build_job(row, pool, site)
    return job


def _build_job(row: QueuedRow, pool: Pool, site: int | None) -> QueuedJob:
    values: dict[str, Any] = dict(json.loads(row.params or "{}"))
    for name in ("gpu_model", "same_leaf", "max_switch_hops", "rail_aligned"):
        value = getattr(row, name)
        # 0 is a value (max_switch_hops=0: one leaf switch), though 0 == False
        if value is not None and value is not False and value != "":
            values[name] = value
    request = ReservationRequest(
        pool_id=pool.pk,
        gpus=row.requested_gpus,
        nodes=row.requested_nodes,
        priority_class=row.priority_class,
        constraints=values,
    )
    wanted = engine_request(request, _at(row.start), _at(row.end))
    if site is not None:
        wanted = dataclasses.replace(wanted, constraints=(*wanted.constraints, OnSites(frozenset({site}))))
    max_wait = row.max_wait if row.max_wait is not None else 0.0
    return QueuedJob(f"q{row.pk}", wanted, row.end - row.start, row.submitted, max_wait, row.gpus)


def holding_windows(pool: Pool, now: dt.datetime, tenants: set[int]) -> dict[int, list[tuple[float, float, int]]]:
    """Per tenant of ``tenants`` (those with queued requests: no other quota is checked), the
    windows of its reservations holding GPUs of the pool from ``now`` on."""
    windows: dict[int, list[tuple[float, float, int]]] = {}
    live = Reservation.objects.live().filter(pool=pool, end__gt=now, tenant_id__in=sorted(tenants)).order_by()
    if connection.vendor == "postgresql":  # epoch seconds from the database: no datetime per row
        epochs = live.annotate(s=_epoch("start"), e=_epoch("end")).values_list("tenant_id", "s", "e", "gpus")
        for tenant_id, start, end, gpus in epochs:
            windows.setdefault(tenant_id, []).append((start, end, gpus))
        return windows
    for tenant_id, start, end, gpus in live.values_list("tenant_id", "start", "end", "gpus"):
        windows.setdefault(tenant_id, []).append((start.timestamp(), end.timestamp(), gpus))
    return windows


def _epoch(expression: str | Any) -> Func:
    """Epoch seconds of a time (seconds of a duration), as the database computes them."""
    source = F(expression) if isinstance(expression, str) else expression
    return Func(source, template="EXTRACT(EPOCH FROM %(expressions)s)::float8", output_field=FloatField())


class QuotaGate:
    """The quota check of the reserve path, at the moment a queued request would be placed: the
    tenant's peak use over the window plus the request within its limit; borrowed above its
    guarantee. Bookings of the pass count as they are made."""

    def __init__(
        self,
        quotas: dict[int, Quota],
        rows: dict[str, QueuedRow],
        windows: dict[int, list[tuple[float, float, int]]],
    ) -> None:
        self.quotas = quotas
        self.rows = rows
        self.windows = windows
        #: The owner each admitted job was last searched as (its borrowed flag).
        self.owners: dict[str, Owner] = {}

    def admit(self, job: QueuedJob, start: float, end: float) -> Owner | None:
        row = self.rows[job.key]
        quota = self.quotas.get(row.tenant_id)
        if quota is None:
            return None
        mine = [
            (max(s, start), min(e, end), g) for s, e, g in self.windows.get(row.tenant_id, []) if s < end and e > start
        ]
        held = peak_usage(mine)
        if held + job.gpus > quota.limit_gpus:
            return None
        borrowed = held + job.gpus > quota.guaranteed_gpus
        owner = self.owners[job.key] = Owner(str(row.tenant_id), borrowed, priority_rank(row.priority_class))
        return owner

    def booked(self, job: QueuedJob, placement: Placement) -> None:
        row = self.rows[job.key]
        self.windows.setdefault(row.tenant_id, []).append((placement.start, placement.end, placement.gpus))


def pools_with_queue() -> list[int]:
    """Pools that have queued requests (the tick's safety pass)."""
    return sorted(set(Reservation.objects.filter(status=S.QUEUED).values_list("pool_id", flat=True)))


def enqueue_after_node_change(node_id: int) -> None:
    """A node returned to service: a pass for each pool it belongs to, after commit."""
    enqueue_queue_pass(Pool.nodes.through.objects.filter(node_id=node_id).values_list("pool_id", flat=True))
