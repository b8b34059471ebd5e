"""The push engine's vocabulary: what it needs from an OpenSM host, its knobs, steps and outcome.

Shared by the engine (:mod:`console.fabric.opensm.push`), its verification
(:mod:`console.fabric.opensm.verify`) and the drivers that report their own pushes the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from console.fabric.diags.runner import DiagRunner
from console.fabric.opensm.files import ArtefactStore
from console.fabric.opensm.lint import LintProblem
from console.fabric.opensm.partitions_file import OperatorPartition


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
class SmKeys:
    """A fabric's management keys as ``opensm.conf`` takes them (secrets: never in a repr)."""

    m_key: int = field(repr=False)
    sm_key: int = field(repr=False)
    sa_key: int = field(repr=False)
    protection_level: int = 2
    lease_period: int = 60

    def options(self) -> dict[str, str]:
        """The ``opensm.conf`` options, with ``m_key_lookup`` off: every port gets this M_Key."""
        return {
            "m_key": f"{self.m_key:#018x}",
            "m_key_protection_level": str(self.protection_level),
            "m_key_lease_period": str(self.lease_period),
            "m_key_lookup": "FALSE",
            "sm_key": f"{self.sm_key:#018x}",
            "sa_key": f"{self.sa_key:#018x}",
        }


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
    # The console's vGUID prefix (opensm/vguids.py): members in that space are virtual ports (pod
    # VFs). No end port's P_Key table carries them, so they are not checked on the wire.
    virtual_prefix: int | None = None
    # Check every checked host's Default membership (limited; the SM's port full) and that two
    # hosts have no path in it. Off only to measure the checks' cost (tests/benchmarks/bench_fabric.py).
    check_default: bool = True
    # The fabric's management keys (None: opensm.conf's keys are left as they are).
    keys: SmKeys | None = field(default=None, repr=False)
    # Subnet-manager high availability, set per SM host in its opensm.conf: this host's SM
    # priority and how its SM polls the master when standby (None: left as the file has them).
    sm_priority: int | None = None
    sminfo_polling_ms: int | None = None
    polling_retries: int | None = None
    # This host's SM is a standby: its files are written and its OpenSM reloaded, the ports are
    # not read (the master programs them and the master's push verifies them): outcome "staged".
    standby: bool = False

    def ha_options(self) -> dict[str, str]:
        """The ``opensm.conf`` options of subnet-manager HA this push sets."""
        out = {}
        if self.sm_priority is not None:
            out["sm_priority"] = str(int(self.sm_priority))
        if self.sminfo_polling_ms is not None:
            out["sminfo_polling_timeout"] = str(int(self.sminfo_polling_ms))
        if self.polling_retries is not None:
            out["polling_retry_number"] = str(int(self.polling_retries))
        return out


@dataclass
class PushStep:
    """One step of a push, as the UI shows it."""

    name: str
    status: str = "pending"  # pending | ok | failed | skipped
    log: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    # A restart drops every SA client's state (unlike a SIGHUP): the console flags it loudly.
    restarted_opensm: bool = False
    # verify: P_Key → port GUID → index in that port's table, from the read that proved it.
    pkey_indexes: dict[int, dict[int, int]] = field(default_factory=dict)
    # verify: P_Key → member port GUIDs not on the fabric (unplugged, powered off): findings on
    # their own partitions, not mismatches of the change.
    absent: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class PushResult:
    """Outcome of a push: ``verified``, ``unchanged`` (verified, nothing to swap), ``staged``
    (a standby SM host: written and reloaded, the ports are the master's to program), ``refused``
    (lint/render failed, nothing written), ``rolled_back`` (mismatch, LKG restored and verified)
    or ``rollback_failed``."""

    outcome: str
    steps: list[PushStep]
    problems: list[LintProblem] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    # Partitions found on the SM host that the console did not write, kept as written.
    kept: Sequence[OperatorPartition] = ()
    # The partitions.conf this push rendered (what the SM host has once it is verified).
    written: str | None = None

    @property
    def ok(self) -> bool:
        """True when the desired partitions are live and verified (on a standby: written)."""
        return self.outcome in ("verified", "unchanged", "staged")

    @property
    def opensm_restarted(self) -> bool:
        """True when a step restarted OpenSM (a non-reloadable option changed, or its rollback)."""
        return any(s.restarted_opensm for s in self.steps)

    @property
    def pkey_indexes(self) -> dict[str, dict[str, int]]:
        """``{"0x8003": {"0x…guid": index}}`` for each member port the verify step read, JSON-ready."""
        out: dict[str, dict[str, int]] = {}
        for s in self.steps:
            if s.name == "verify":
                for pkey, ports in s.pkey_indexes.items():
                    out.setdefault(f"{pkey:#06x}", {}).update({f"{g:#018x}": i for g, i in ports.items()})
        return out

    @property
    def absent_members(self) -> dict[str, list[str]]:
        """``{"0x8003": ["0x…guid"]}``: member ports the last verify step found off the fabric."""
        verify = [s for s in self.steps if s.name == "verify"]
        if not verify:
            return {}
        return {
            f"{pkey:#06x}": [f"{g:#018x}" for g in sorted(guids)] for pkey, guids in sorted(verify[-1].absent.items())
        }

    def step(self, name: str) -> PushStep:
        """The step called ``name``."""
        return next(s for s in self.steps if s.name == name)
