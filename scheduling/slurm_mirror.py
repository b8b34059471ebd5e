"""Reservations mirrored into Slurm as advance reservations (optional: ``SLURM_MIRROR_CONF``).

A reconciler, like the fabric's partitions: the reservations that hold nodes (placed,
provisioning, ready) are what Slurm should have, each as ``res-<id>`` on its nodes, for its
window, for the Slurm account named after its tenant's slug; ``scontrol show reservation`` says
what Slurm has. Missing ones are created, changed ones (an extension moves the end) updated,
ours that no longer hold nodes (released, cancelled, preempted, expired) deleted. Slurm's own
reservations (not ``res-<number>``) are never touched. Idempotent; the periodic
``scheduling.slurm_sync`` task runs it, so an extension or a release reaches Slurm within a tick.

scontrol runs with ``TZ=UTC`` so that the times it reads and prints are UTC, whatever the zone of
the console's host.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from scheduling.hostlist import compress, expand
from scheduling.models import Node, Reservation, ReservationAllocation
from scheduling.services.node_paths import PREFIX

NAME = re.compile(r"^res-\d+$")
SLURM_TIME = "%Y-%m-%dT%H:%M:%S"

Scontrol = Callable[..., str]


@dataclass(frozen=True)
class SlurmReservation:
    """What one advance reservation says: its nodes, window (UTC, whole seconds) and account."""

    name: str
    nodes: frozenset[str]
    start: dt.datetime
    end: dt.datetime
    account: str


def _second(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC).replace(microsecond=0, tzinfo=None)


def desired() -> dict[str, SlurmReservation]:
    """The advance reservations Slurm should hold: one per reservation that holds nodes."""
    now = timezone.now()
    live = Reservation.objects.filter(status__in=Reservation.HOLDING, end__gt=now).select_related("tenant")
    nodes: dict[int, set[str]] = {}
    rows = ReservationAllocation.objects.filter(reservation__in=live).values_list("reservation_id", "node__name")
    for reservation_id, node in rows:
        nodes.setdefault(reservation_id, set()).add(node)
    return {
        r.partition_name: SlurmReservation(
            r.partition_name, frozenset(nodes[r.pk]), _second(r.start), _second(r.end), r.tenant.slug
        )
        for r in live
        if r.pk in nodes
    }


def parse(text: str) -> dict[str, SlurmReservation]:
    """Our reservations in ``scontrol -o show reservation`` output (one per line)."""
    out: dict[str, SlurmReservation] = {}
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        name = fields.get("ReservationName", "")
        if not NAME.match(name):
            continue
        out[name] = SlurmReservation(
            name,
            frozenset(expand(fields["Nodes"])) if fields.get("Nodes", "(null)") != "(null)" else frozenset(),
            dt.datetime.strptime(fields["StartTime"], SLURM_TIME),
            dt.datetime.strptime(fields["EndTime"], SLURM_TIME),
            fields.get("Accounts", ""),
        )
    return out


def commands(want: dict[str, SlurmReservation], have: dict[str, SlurmReservation], now: dt.datetime) -> list[list[str]]:
    """The scontrol calls that turn ``have`` into ``want`` (empty when they agree)."""
    now = _second(now)
    calls: list[list[str]] = []
    for name, r in sorted(want.items()):
        start = "now" if r.start <= now else r.start.strftime(SLURM_TIME)
        fields = [
            f"Nodes={compress(sorted(r.nodes))}",
            f"EndTime={r.end.strftime(SLURM_TIME)}",
            f"Accounts={r.account}",
        ]
        old = have.get(name)
        if old is None:
            calls.append(
                ["create", "reservation", f"ReservationName={name}", f"StartTime={start}", *fields, "Flags=IGNORE_JOBS"]
            )
        elif (old.nodes, old.end, old.account) != (r.nodes, r.end, r.account) or (
            r.start > now and old.start != r.start
        ):
            moved = [f"StartTime={start}"] if r.start > now and old.start != r.start else []
            calls.append(["update", f"ReservationName={name}", *moved, *fields])
    calls += [["delete", f"ReservationName={name}"] for name in sorted(set(have) - set(want))]
    return calls


def run_scontrol(*args: str) -> str:
    """scontrol against the controller of ``SLURM_MIRROR_CONF``; raises with Slurm's message."""
    env = {**os.environ, "SLURM_CONF": settings.SLURM_MIRROR_CONF, "TZ": "UTC"}
    done = subprocess.run(["scontrol", *args], env=env, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"scontrol {' '.join(args)}: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def drains() -> dict[str, str]:
    """The nodes Slurm should hold drained, with why: those that lost their path on the fabric."""
    return dict(Node.objects.exclude(path_lost="").values_list("name", "path_lost"))


_REASON = re.compile(r"\bReason=(.*?)(?: \[[^\]]*\])?(?= \w+=|$)")


def parse_nodes(text: str) -> dict[str, tuple[bool, str]]:
    """``scontrol -o show node``: node → (drained, reason without Slurm's ``[user@time]``)."""
    out: dict[str, tuple[bool, str]] = {}
    for line in text.splitlines():
        name = re.search(r"\bNodeName=(\S+)", line)
        state = re.search(r"\bState=(\S+)", line)
        if name is None or state is None:
            continue
        reason = _REASON.search(line)
        out[name.group(1)] = ("DRAIN" in state.group(1).split("+"), reason.group(1) if reason else "")
    return out


def node_commands(want: dict[str, str], have: dict[str, tuple[bool, str]]) -> list[list[str]]:
    """Drain the nodes of ``want`` Slurm knows (with the reason), resume the ones the console drained
    and no longer wants drained (an operator's own drains are never touched)."""
    calls = [
        ["update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"]
        for name, reason in sorted(want.items())
        if name in have and have[name] != (True, reason)
    ]
    calls += [
        ["update", f"NodeName={name}", "State=RESUME"]
        for name, (drained, reason) in sorted(have.items())
        if drained and reason.startswith(PREFIX) and name not in want
    ]
    return calls


def sync(scontrol: Scontrol = run_scontrol) -> dict[str, int]:
    """Bring Slurm's ``res-*`` reservations and the console's node drains in line with the
    console; counts of each call made."""
    counts = {"create": 0, "update": 0, "delete": 0, "drain": 0, "resume": 0}
    # drains first: a node cut off must not wait behind a reservation Slurm refuses
    for call in node_commands(drains(), parse_nodes(scontrol("-o", "show", "node"))):
        kind = "drain" if call[2] == "State=DRAIN" else "resume"
        try:
            scontrol(*call)
        except RuntimeError:
            # Slurm refuses to resume a node that does not answer yet clears its drain: read back
            node = call[1].split("=", 1)[1]
            if parse_nodes(scontrol("-o", "show", "node", node)).get(node, (True, ""))[0] != (kind == "drain"):
                raise
        counts[kind] += 1
    have = parse(scontrol("-o", "show", "reservation"))
    for call in commands(desired(), have, timezone.now()):
        scontrol(*call)
        counts[call[0]] += 1
    return counts
