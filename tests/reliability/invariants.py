"""What must hold after every fault, checked in the database and, from outside, on the wire.

- no double booking: no two allocation rows of one GPU overlap in time;
- no quota overrun: no tenant holds more GPUs of a pool, at any instant, than its quota allows;
- every reservation final or ready (checked with a deadline by the caller);
- the wire matches: every ready reservation's P_Key is on each of its HCA ports, and no HCA port
  carries a P_Key that no ready reservation of that node owns (read with ``smpquery pkeys``);
- no audit row lost: one audit row per committed mutation.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from dataclasses import dataclass, field

from django.db.models import F

from console.fabric.diags.runner import DiagError, DiagRunner
from console.fabric.lab.ibsim_console import IBSIM_MAX_CLIENTS, attached
from console.fabric.lab.manager import Lab
from console.fabric.models import ChangeRequest, Fabric
from console.tenancy.models import AuditEntry
from scheduling.models import Quota, Reservation, ReservationAllocation
from scheduling.services.quotas import usage

S = Reservation.Status
FINAL = (S.RELEASED, S.CANCELLED, S.PREEMPTED, S.REJECTED)
DEFAULT_PKEY = 0x7FFF


def settled(fabric: Fabric) -> bool:
    """Every reservation ready or final (P_Key freed), and no change under way."""
    unsettled = Reservation.objects.filter(fabric=fabric).exclude(status__in=(S.READY, *FINAL))
    live_final = Reservation.objects.filter(fabric=fabric, status__in=FINAL, pkey_live=True)
    return not unsettled.exists() and not live_final.exists()


def unsettled(fabric: Fabric) -> list[tuple[int, str, str]]:
    rows = Reservation.objects.filter(fabric=fabric).exclude(status__in=(S.READY, *FINAL))
    return list(rows.values_list("pk", "status", "fabric_error"))


def double_bookings() -> list[tuple[int, int]]:
    """Pairs of allocation rows of the same GPU whose time ranges overlap."""
    clashes = []
    rows = ReservationAllocation.objects.filter(end__gt=F("start")).order_by("gpu_id", "start")
    previous: dict[int, tuple[int, dt.datetime]] = {}
    for pk, gpu_id, start, end in rows.values_list("pk", "gpu_id", "start", "end"):
        last = previous.get(gpu_id)
        if last is not None and start < last[1]:
            clashes.append((last[0], pk))
        if last is None or end > last[1]:
            previous[gpu_id] = (pk, end)
    return clashes


def quota_overruns(now: dt.datetime) -> list[str]:
    """Tenants holding more than guaranteed + borrow limit of a pool from ``now`` on."""
    over = []
    for quota in Quota.objects.all():
        limit = quota.guaranteed_gpus + quota.borrow_limit_gpus
        held = usage(quota.tenant_id, quota.pool_id, now)
        if held > limit:
            over.append(f"tenant {quota.tenant_id} holds {held} > {limit} GPUs of pool {quota.pool_id}")
    return over


@dataclass
class WireReport:
    ports_read: int = 0
    missing: list[str] = field(default_factory=list)  # a ready reservation's P_Key absent on its port
    stray: list[str] = field(default_factory=list)  # a P_Key on a port no ready reservation owns


def wire_mismatches(fabric: Fabric, lab: Lab, lids: dict[int, int], guids_of_node: dict[int, list[int]]) -> WireReport:
    """Read the P_Key table of every HCA port of every node a reservation ever held (all of them
    for ready reservations, one per node otherwise) and compare with the ready reservations."""
    report = WireReport()
    expected: dict[int, set[int]] = {}  # node id → P_Keys of ready reservations holding it
    touched: set[int] = set()
    for node_id, status, pkey in ReservationAllocation.objects.filter(reservation__fabric=fabric).values_list(
        "node_id", "reservation__status", "reservation__pkey"
    ):
        touched.add(node_id)
        if status == S.READY and pkey is not None:
            expected.setdefault(node_id, set()).add(pkey & 0x7FFF)
    diags = lab.diags(timeout=20)
    for node_id in sorted(touched):
        ports = guids_of_node[node_id] if node_id in expected else guids_of_node[node_id][:1]
        for guid in ports:
            present = _pkeys(lab, diags, lids[guid]) - {DEFAULT_PKEY, 0}
            report.ports_read += 1
            want = expected.get(node_id, set())
            report.missing += [f"node {node_id} port {guid:#x}: {p:#06x} missing" for p in sorted(want - present)]
            report.stray += [f"node {node_id} port {guid:#x}: {p:#06x} stray" for p in sorted(present - want)]
    return report


def _pkeys(lab: Lab, diags: DiagRunner, lid: int, wait_s: float = 30.0) -> set[int]:
    """The port's P_Keys by ``smpquery``; when ibsim has no client slot free for it (a process
    killed this round may still hold some, the console's pushes take others), the slots of dead
    processes are freed and the read waits for a free one, up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return set(diags.pkeys(lid).pkeys())
        except DiagError as exc:
            if "connect failed" not in str(exc) or time.monotonic() > deadline:
                raise
        lab.reap_dead_clients()
        while len(attached(lab.workdir)) >= IBSIM_MAX_CLIENTS and time.monotonic() < deadline:
            time.sleep(0.05)  # polls for a free slot; the read above is what is checked


def audit_gaps(fabric: Fabric) -> list[str]:
    """Committed mutations without exactly one audit row: each reservation's creation, each
    state it reached, each change's creation and outcome."""
    gaps = []
    rows = Counter(AuditEntry.objects.filter(object_type="scheduling.reservation").values_list("action", "object_id"))
    for r in Reservation.objects.filter(fabric=fabric):
        key = str(r.pk)
        expect = {"reservation.reject" if r.status == S.REJECTED else "reservation.create": 1}
        if r.ready_at is not None:
            expect["reservation.ready"] = 1
        if r.status == S.RELEASED:
            expect["reservation.released"] = 1
        for action, count in expect.items():
            if rows[(action, key)] != count:
                gaps.append(f"reservation {r.pk} ({r.status}): {rows[(action, key)]} × {action}")
    changes = Counter(AuditEntry.objects.filter(action__startswith="fabric.change.").values_list("action", "object_id"))
    for change in ChangeRequest.objects.filter(fabric=fabric):
        key = str(change.pk)
        if changes[("fabric.change.create", key)] != 1:
            gaps.append(f"change {change.pk}: {changes[('fabric.change.create', key)]} × fabric.change.create")
        outcome = f"fabric.change.{change.status}"
        if change.is_terminal and change.status != ChangeRequest.Status.CANCELLED and changes[(outcome, key)] != 1:
            gaps.append(f"change {change.pk} ({change.status}): {changes[(outcome, key)]} × {outcome}")
    return gaps
