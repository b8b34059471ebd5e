"""The collector's publisher: coalesced link deltas per live group, change progress, and the
snapshot a client resyncs from.

Each group (``fabric.<id>``, every link; ``tenant.<id>``, the links of the tenant's jobs) hears at
most one delta per sweep, holding only the links whose state, bucket or errors moved (an empty one
at least every :data:`KEEPALIVE_S`, so clients notice gaps). Messages leave through
:func:`console.broadcast.publish_many`.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q
from django.utils import timezone

from console.broadcast import change_group, current_seqs, fabric_group, publish_many, tenant_group
from console.fabric.models import ChangeRequest
from console.telemetry import services, store
from console.telemetry.core import LinkStatus, changed_links
from console.telemetry.linkmap import LinkMap
from console.telemetry.workload import Workload

KEEPALIVE_S = 10.0  # an empty delta at least this often, so clients notice gaps


@dataclass
class _Published:
    keys: dict[str, tuple[bool, int, bool, int]] = field(default_factory=dict)
    last: float = 0.0


class LivePublisher:
    """What one fabric's collector has told each live group so far, and the next message."""

    def __init__(self, fabric_id: int, epoch: int, workload: Workload) -> None:
        self.fabric_id = fabric_id
        self.epoch = epoch
        self.workload = workload
        self.published: dict[str, _Published] = defaultdict(_Published)
        self.change_sigs: dict[int, tuple] = {}

    def groups(self) -> list[tuple[str, set[str] | None]]:
        """Live groups and their links (None: every link)."""
        out: list[tuple[str, set[str] | None]] = [(fabric_group(self.fabric_id), None)]
        out += [(tenant_group(tid), links) for tid, links in self.workload.tenant_links.items()]
        return out

    def groups_ready(self, chunks: list[dict[str, list[int]]], lm: LinkMap) -> dict[int, list[str]]:
        """chunk index → the groups whose links are all read once that chunk is."""
        chunk_of = {sw: i for i, chunk in enumerate(chunks) for sw in chunk}
        last = len(chunks) - 1
        out: dict[int, list[str]] = defaultdict(list)
        for group, links in self.groups():
            if links is None:
                at = last
            else:
                at = max((chunk_of.get(lm.ends[lk].switch, last) for lk in links if lk in lm.ends), default=last)
            out[at].append(group)
        return out

    def publish(self, statuses: dict[str, LinkStatus], wall: float, only: list[str] | None = None) -> int:
        """At most one delta per group per sweep, only links whose state/bucket/errors moved;
        ``only``: these groups (the others are published later in the sweep). Returns how many
        links moved."""
        now = time.monotonic()
        messages: list[tuple[str, dict[str, Any]]] = []
        groups: list[tuple[str, dict[str, LinkStatus]]] = []
        for group, links in self.groups():
            if only is not None and group not in only:
                continue
            subset = statuses if links is None else {k: statuses[k] for k in links if k in statuses}
            groups.append((group, subset))
        total = 0
        for group, subset in groups:
            pub = self.published[group]
            moved = changed_links(subset, pub.keys)
            if not moved and now - pub.last < KEEPALIVE_S:
                continue
            for lid in moved:
                pub.keys[lid] = subset[lid].key
            pub.last = now
            total += len(moved)
            messages.append(
                (
                    group,
                    {
                        "type": "link.delta",
                        "fabric": self.fabric_id,
                        "at": wall,
                        "links": [subset[k].as_dict() for k in moved],
                    },
                )
            )
        publish_many(messages)
        return total

    def change_progress(self) -> None:
        """Stream the steps of changes in flight (and their last state) to ``change.<id>``.

        The push pipeline records steps in the database; a progress hook in
        console/fabric/changes/pipeline.py calling ``publish`` would make this immediate."""
        recent = timezone.now() - dt.timedelta(seconds=30)
        ids = (
            ChangeRequest.objects.filter(fabric_id=self.fabric_id)
            .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=recent))
            .values_list("pk", flat=True)[:20]
        )
        messages = []
        for change_id in ids:
            msg = services.change_progress(change_id)
            if msg is None:
                continue
            sig = (msg["status"], tuple((s["seq"], s["status"]) for s in msg["steps"]))
            if self.change_sigs.get(change_id) != sig:
                self.change_sigs[change_id] = sig
                messages.append((change_group(change_id), msg))
        publish_many(messages)

    def snapshot(
        self, statuses: dict[str, LinkStatus], wall: float, cycle: float, lm: LinkMap, *, sm: dict | None = None
    ) -> None:
        """Leave this sweep's state where the web processes answer resyncs from."""
        jobs = self.workload.jobs
        names = {r.tenant_id: r.tenant_name for r, _ in jobs if r is not None}
        tenants = {
            str(tid): {
                "name": names.get(tid, ""),
                "links": sorted(links),
                "reservation_names": {str(r.id): r.name for r, _ in jobs if r is not None and r.tenant_id == tid},
                "reservations": {str(r.id): list(j.nodes) for r, j in jobs if r is not None and r.tenant_id == tid},
                "reservation_links": {
                    str(r.id): sorted(lm.links_of_nodes(set(j.nodes)))
                    for r, j in jobs
                    if r is not None and r.tenant_id == tid
                },
            }
            for tid, links in self.workload.tenant_links.items()
        }
        # the seqs this snapshot is current with, read after the sweep's deltas went out
        # (store.snapshot_seq)
        seqs = current_seqs([group for group, _ in self.groups()])
        store.save_snapshot(
            self.fabric_id,
            {
                "fabric": self.fabric_id,
                "epoch": self.epoch,
                "at": wall,
                "cycle_s": round(cycle, 4),
                "seqs": seqs,
                "links": {k: v.as_dict() for k, v in statuses.items()},
                "tenants": tenants,
                "summary": services.summarise(statuses.values()),
                "sm": sm or {},
            },
        )
