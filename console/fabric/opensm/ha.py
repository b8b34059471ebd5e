"""Subnet-manager high availability: the priorities and SMInfo polling the console sets.

Every SM host of a fabric runs OpenSM with the same files but its own ``sm_priority``; a standby
polls the master's SMInfo every ``sminfo_polling_timeout`` ms and declares it dead after
``polling_retry_number`` failed polls, then takes over (a sweep with its own files). OpenSM's
defaults (10,000 ms × 4) make that 60 s on the lab; the console sets 1,000 ms × 3: a standby is
master about 5 s after the master's death (median of 4.94-5.17 s on the lab, its first sweep
included: ``docs/benchmarks.md``). The cost is one SMInfo MAD a second per standby, and a master that
cannot answer for 3 s (a host frozen that long) loses mastership: on a fabric whose master is
known to stall, raise them in ``Fabric.config`` (``sminfo_polling_ms``, ``polling_retries``).

Priorities: a master hands over to any SM of higher priority it finds (equal priorities: the
lower port GUID wins), so an SM host coming back must never outrank the one that took over. The
master runs at :data:`MASTER_PRIORITY`, standbys at :data:`STANDBY_PRIORITY`; after a takeover
the new master runs at :data:`TAKEOVER_PRIORITY` until every SM host holds the current files, so
the old master, back with its old files (its :data:`MASTER_PRIORITY`), stays standby; its agent
then writes its standby priority and the master goes back to :data:`MASTER_PRIORITY`. The new
master's own agent raises it to :data:`TAKEOVER_PRIORITY` within a second of the takeover
(``Agent._hold_mastership``): an old master restarted at once (systemd) must not find it at 13.
What this cannot cover: a second takeover while an SM host is still away with a file at 15 ties
at 15, and the lower port GUID wins.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from console.fabric.opensm.conf import parse_opensm_conf

MASTER_PRIORITY = 14
STANDBY_PRIORITY = 13
TAKEOVER_PRIORITY = 15
SMINFO_POLLING_MS = 1000
POLLING_RETRIES = 3


def polling(config: Mapping[str, object] | None) -> tuple[int, int]:
    """(``sminfo_polling_timeout`` ms, ``polling_retry_number``) of a fabric: its
    ``Fabric.config`` ``sminfo_polling_ms`` / ``polling_retries``, else the console's."""
    config = config or {}
    ms, retries = config.get("sminfo_polling_ms"), config.get("polling_retries")
    return int(str(ms)) if ms else SMINFO_POLLING_MS, int(str(retries)) if retries else POLLING_RETRIES


def all_in_step(other_priorities: Iterable[int | None], *, any_away: bool) -> bool:
    """True when no SM host but the master can claim more than a standby's priority: none is
    away (its files unknown) and every other one's opensm.conf says a standby's (None: 0)."""
    return not any_away and all((p or 0) <= STANDBY_PRIORITY for p in other_priorities)


def priority_for(*, master: bool, all_in_step: bool) -> int:
    """The ``sm_priority`` of an SM host: the master's (raised while some SM host may still hold
    older files), or a standby's."""
    if not master:
        return STANDBY_PRIORITY
    return MASTER_PRIORITY if all_in_step else TAKEOVER_PRIORITY


#: ``opensm.conf`` options that are each SM host's own (its priority, its port, its log); every
#: option whose value is a path is too (each host's own directory).
PER_HOST_OPTIONS = frozenset({"sm_priority", "guid", "log_file", "log_max_size", "daemon"})
HASHED_FILES = ("partitions.conf", "qos-policy.conf", "opensm.conf")


def shared_config(files: Mapping[str, str]) -> str:
    """What every SM host of a fabric must run alike, as text: its partitions and QoS policy as
    written, and its ``opensm.conf`` options but the per-host ones, one ``key value`` per line."""
    out = []
    for name in HASHED_FILES:
        text = files.get(name)
        if text is None:
            continue
        if name == "opensm.conf":
            options = parse_opensm_conf(text)
            text = "\n".join(
                f"{k} {v}" for k, v in sorted(options.items()) if k not in PER_HOST_OPTIONS and not v.startswith("/")
            )
        out.append(f"# {name}\n{text.strip()}\n")
    return "".join(out)


def config_hash(files: Mapping[str, str]) -> str:
    """SHA-256 of :func:`shared_config` (what the agents report and the console compares)."""
    return hashlib.sha256(shared_config(files).encode()).hexdigest()


def conf_priority(files: Mapping[str, str]) -> int | None:
    """The ``sm_priority`` an SM host's ``opensm.conf`` sets (None: not set, OpenSM's 0)."""
    value = parse_opensm_conf(files.get("opensm.conf") or "").get("sm_priority")
    return int(value) if value is not None and value.isdigit() else None
