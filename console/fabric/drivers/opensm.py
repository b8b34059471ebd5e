"""The ``opensm`` and ``lab`` drivers: OpenSM's files, a reload or restart, and SMP verification.

Both run the lab-tested engine of :mod:`console.fabric.opensm.push` for partitions, add the QoS
artefacts (``qos-policy.conf`` and the QoS options of ``opensm.conf``) and port administration
(:mod:`console.fabric.drivers.switch`). The only difference is the host: a lab (ibsim + OpenSM
started by :mod:`console.fabric.lab`) or a local OpenSM whose directory, pid and restart command
come from ``Fabric.config``.

Order of a push: everything is rendered and linted before anything is written; QoS files are
swapped first (SIGHUP, or a restart when ``opensm.conf`` changed a non-reloadable option, named
in the step log); then the partition push (swap → SIGHUP → verify on the ports → rollback); then
the QoS check on the wire (PathRecord SL); then port administration, each port read back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from console.fabric.diags.mad import shared_session
from console.fabric.diags.runner import DiagEnv, DiagError, DiagRunner
from console.fabric.drivers.base import (
    DesiredFabric,
    DriverError,
    DriverUnavailable,
    PortStateResult,
    Progress,
    no_progress,
)
from console.fabric.drivers.registry import diag_timeout_of, register_driver
from console.fabric.drivers.switch import SmpPortAdmin
from console.fabric.opensm.conf import classify_changes, parse_opensm_conf
from console.fabric.opensm.files import Artefact, ArtefactStore
from console.fabric.opensm.lint import ArtefactRejected, LintProblem, format_guid
from console.fabric.opensm.partitions import (
    Membership,
    lint_partitions,
    render_partitions,
)
from console.fabric.opensm.push import PushOptions, PushResult, PushStep, push_partitions
from console.fabric.opensm.qos import QosOptions, QosPolicy, render_qos_options, render_qos_policy
from console.fabric.opensm.qos_verify import ports_to_check, verify_qos_tables

PARTITIONS = "partitions.conf"
QOS_POLICY = "qos-policy.conf"
OPENSM_CONF = "opensm.conf"


class OpenSmHost(Protocol):
    """An OpenSM the driver can write files for, signal, restart and run diags against."""

    @property
    def artefacts(self) -> ArtefactStore: ...

    def reload(self) -> None: ...

    def restart(self) -> None: ...

    def diags(self, *, timeout: float | None = None) -> DiagRunner: ...


class LocalOpenSmHost:
    """OpenSM on this machine, described by ``Fabric.config``::

    {"directory": "/etc/opensm", "pid_file": "/run/opensm.pid" | "pid": 1234,
     "reload_command": [...], "restart_command": ["systemctl", "restart", "opensm"],
     "ca": "mlx5_0", "ca_port": 1}
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        directory = config.get("directory")
        if not directory:
            raise DriverUnavailable("opensm driver needs config.directory (OpenSM's file directory)")
        self.config = dict(config)
        self._store = ArtefactStore(Path(directory))

    @property
    def artefacts(self) -> ArtefactStore:
        """OpenSM's input directory."""
        return self._store

    def pid(self) -> int:
        """OpenSM's pid from ``config.pid`` or ``config.pid_file``."""
        if self.config.get("pid"):
            return int(self.config["pid"])
        pid_file = self.config.get("pid_file")
        if not pid_file:
            raise DriverUnavailable("opensm driver needs config.pid_file, pid or reload_command")
        try:
            return int(Path(pid_file).read_text().split()[0])
        except (OSError, ValueError, IndexError) as exc:
            raise DriverUnavailable(f"cannot read OpenSM pid from {pid_file}: {exc}") from exc

    def _run(self, argv: list[str], what: str) -> None:
        try:
            subprocess.run(argv, check=True, timeout=60, capture_output=True)
        except (OSError, subprocess.SubprocessError) as exc:
            raise DriverError(f"{what} failed: {exc}") from exc

    def reload(self) -> None:
        """``reload_command`` if configured, else SIGHUP to OpenSM's pid."""
        if self.config.get("reload_command"):
            self._run(list(self.config["reload_command"]), "reload")
            return
        try:
            os.kill(self.pid(), signal.SIGHUP)
        except ProcessLookupError as exc:
            raise DriverUnavailable("OpenSM is not running") from exc

    def restart(self) -> None:
        """Run ``restart_command`` (a restart cannot be improvised safely)."""
        if not self.config.get("restart_command"):
            raise DriverError("OpenSM needs a restart but config.restart_command is not set")
        self._run(list(self.config["restart_command"]), "restart")

    def diags(self, *, timeout: float | None = None) -> DiagRunner:
        """infiniband-diags on the local HCA."""
        env = DiagEnv(ca=self.config.get("ca"), ca_port=self.config.get("ca_port"))
        return DiagRunner(env, timeout=timeout or 10.0)


class LabHost:
    """A running lab (:class:`console.fabric.lab.manager.Lab`) as an OpenSM host."""

    def __init__(self, lab: Any) -> None:
        self.lab = lab

    @property
    def artefacts(self) -> ArtefactStore:
        """The lab's OpenSM directory."""
        return self.lab.artefacts

    def reload(self) -> None:
        """SIGHUP the lab's OpenSM."""
        self.lab.reload()

    def restart(self) -> None:
        """Restart the lab's OpenSM with its arguments and wait for the subnet."""
        self.lab.restart_sm(wait=True)

    def diags(self, *, timeout: float | None = None) -> DiagRunner:
        """Diags pointed at the lab."""
        return self.lab.diags(timeout=timeout)

    def sweep_mark(self) -> int:
        """Where OpenSM's (flushed) log ends now; see :meth:`swept_since`."""
        return self.lab.sweep_mark()

    def swept_since(self, mark: int) -> bool:
        """True once OpenSM logged the end of a heavy sweep after ``mark``."""
        return self.lab.swept_since(mark)

    def port_lids(self) -> dict[int, tuple[int, int]]:
        """HCA port GUID → (LID, port) as discovered when the lab came up (a hint)."""
        return self.lab.port_lids()


class _ProgressTarget:
    """The engine's PushTarget, reporting steps as they start (and running test pauses)."""

    def __init__(self, host: OpenSmHost, progress: Progress) -> None:
        self.host = host
        self.progress = progress
        self.reloads = 0

    @property
    def artefacts(self) -> ArtefactStore:
        return self.host.artefacts

    def reload(self) -> None:
        self.reloads += 1
        self.progress("reload" if self.reloads == 1 else "rollback", "running")
        self.host.reload()

    def diags(self, *, timeout: float | None = None) -> DiagRunner:
        self.progress("verify", "running")
        return self.host.diags(timeout=timeout)

    # The engine's optional hooks, passed through when the host has them.

    def sweep_mark(self) -> object | None:
        mark = getattr(self.host, "sweep_mark", None)
        return mark() if callable(mark) else None

    def swept_since(self, mark: object) -> bool:
        return bool(self.host.swept_since(mark))  # type: ignore[attr-defined]

    def port_lids(self) -> dict[int, tuple[int, int]]:
        lids = getattr(self.host, "port_lids", None)
        return lids() if callable(lids) else {}


def qos_artefacts(policy: QosPolicy, store: ArtefactStore, qos_options: QosOptions | None = None) -> list[Artefact]:
    """``qos-policy.conf`` plus ``opensm.conf`` with QoS switched on (other options kept); the
    ``qos_*`` options are the fabric's QoS table when given, else the live (or default) ones."""
    policy_text = render_qos_policy(policy)
    live = store.read(OPENSM_CONF) or ""
    options = parse_opensm_conf(live)
    wanted = {"qos": "TRUE", "qos_policy_file": str(store.path(QOS_POLICY))}
    if qos_options is not None:
        wanted.update(render_qos_options(qos_options))
    for key, value in render_qos_options(QosOptions()).items():
        wanted.setdefault(key, options.get(key, value))
    options.update(wanted)
    lines = ["# Managed by the InfiniBand console; edits here are overwritten."]
    lines += [f"{k} {v}" for k, v in options.items()]
    return [
        Artefact("qos-policy", QOS_POLICY, policy_text),
        Artefact("opensm-conf", OPENSM_CONF, "\n".join(lines) + "\n"),
    ]


def _refused(steps: list[PushStep], problems: list[LintProblem], started: float) -> PushResult:
    return PushResult("refused", steps, problems=problems, duration_s=round(time.monotonic() - started, 3))


class OpenSmDriver:
    """Push desired state to an OpenSM host and prove it on the wire."""

    name = "opensm"

    def __init__(self, host: OpenSmHost, *, diag_timeout: float = 5.0) -> None:
        self.host = host
        self.diag_timeout = diag_timeout
        self.ports = SmpPortAdmin(lambda: self.host.diags(timeout=diag_timeout))

    # -- the FabricDriver interface ------------------------------------------------------------

    def read_applied(self) -> dict[str, str]:
        """Live partitions.conf and qos-policy.conf."""
        store = self.host.artefacts
        out = {}
        for name in (PARTITIONS, QOS_POLICY):
            text = store.read(name)
            if text is not None:
                out[name] = text
        return out

    def verify(self, desired: DesiredFabric, *, options: PushOptions | None = None) -> list[str]:
        """Re-verify without writing: the live file must be the desired one, then the ports."""
        text = render_partitions(desired.partitions)
        if self.host.artefacts.read(PARTITIONS) != text:
            return [f"live {PARTITIONS} differs from the desired one"]
        result = push_partitions(self.host, list(desired.partitions), options)
        return list(result.mismatches)

    def set_port_state(
        self,
        switch: str,
        port: int,
        enabled: bool,
        *,
        width: int | None = None,
        speed: int | None = None,
    ) -> PortStateResult:
        """Port administration over SMPs (``ibportstate``), read back."""
        return self.ports.set_port_state(switch, port, enabled, width=width, speed=speed)

    def push(
        self,
        desired: DesiredFabric,
        *,
        previous: DesiredFabric | None = None,
        options: PushOptions | None = None,
        progress: Progress = no_progress,
    ) -> PushResult:
        """Render → lint → (QoS swap, reload/restart) → partition push → QoS check → port admin."""
        options = options or PushOptions(diag_timeout=self.diag_timeout)
        started = time.monotonic()
        store = self.host.artefacts
        target = _ProgressTarget(self.host, progress)
        partitions = list(desired.partitions)
        # Nothing is written unless every artefact of the change lints clean.
        try:
            partitions_ok = not lint_partitions(render_partitions(partitions))
        except ValueError:
            partitions_ok = False
        if not partitions_ok:
            progress("render", "running")
            return push_partitions(target, partitions, options)  # refused, with precise steps
        pre: list[PushStep] = []
        qos_on = desired.qos is not None or desired.qos_options is not None
        conf_before = store.read(OPENSM_CONF)
        if qos_on:
            progress("qos", "running")
            step, problems = self._swap_qos(desired.qos or QosPolicy(), store, desired.qos_options)
            pre.append(step)
            if problems:
                return _refused(pre, problems, started)
        progress("render", "running")
        result = push_partitions(target, partitions, options)
        result.steps[:0] = pre
        if result.ok and desired.qos is not None:
            progress("verify-qos", "running")
            self._verify_qos(desired, result, options)
        if result.ok and desired.qos_options is not None:
            # Only a push that changed what OpenSM programs touched the ports' tables.
            touched = (
                previous is None
                or previous.qos_options != desired.qos_options
                or store.read(OPENSM_CONF) != conf_before
            )
            progress("verify-vl", "running")
            if touched:
                self._verify_vl(desired.qos_options, result, options)
            else:
                skipped = PushStep("verify-vl", status="skipped")
                skipped.log.append("QoS options unchanged and opensm.conf untouched: no port reprogrammed")
                result.steps.append(skipped)
        if result.ok:
            if qos_on:
                store.mark_good([QOS_POLICY, OPENSM_CONF])
            for wanted in sorted(desired.port_admin):
                progress(f"port-admin:{wanted.label}", "running")
                self._port_step(wanted, result)
        result.duration_s = round(time.monotonic() - started, 3)
        return result

    # -- QoS ---------------------------------------------------------------------------------

    def _swap_qos(
        self, policy: QosPolicy, store: ArtefactStore, qos_options: QosOptions | None
    ) -> tuple[PushStep, list[LintProblem]]:
        t = time.monotonic()
        step = PushStep("qos", status="running")
        try:
            artefacts = qos_artefacts(policy, store, qos_options)
        except ValueError as exc:
            step.status, step.log = "failed", [str(exc)]
            return step, [LintProblem(QOS_POLICY, None, "render", str(exc))]
        old_conf = store.read(OPENSM_CONF) or ""
        try:
            swap = store.swap(artefacts)
        except ArtefactRejected as exc:
            step.status, step.log = "failed", [str(p) for p in exc.problems]
            return step, exc.problems
        change = classify_changes(old_conf, store.read(OPENSM_CONF) or "")
        step.log.append(f"replaced {', '.join(swap.changed) or 'nothing'}")
        if change.needs_restart:
            step.log.append(
                "restarting OpenSM: non-reloadable options changed: " + ", ".join(change.restart_required_by)
            )
            self.host.restart()
            step.restarted_opensm = True
        elif swap.changed:
            step.log.append("SIGHUP sent (QoS policy and reloadable options)")
            self.host.reload()
        step.status, step.duration_s = "ok", time.monotonic() - t
        return step, []

    def _verify_qos(self, desired: DesiredFabric, result: PushResult, options: PushOptions) -> None:
        """PathRecords between two full members of a partition must carry its class's SL."""
        assert desired.qos is not None
        t = time.monotonic()
        step = PushStep("verify-qos", status="running")
        result.steps.append(step)
        diags = self.host.diags(timeout=options.diag_timeout)
        topo = diags.ibnetdiscover()
        lids = {g: topo.nodes[nid].lid for (nid, _), g in topo.port_guids.items()}
        by_pkey = {p.pkey: p for p in desired.partitions}
        mismatches = []
        for cls in desired.qos.classes:
            part = by_pkey.get(cls.pkey)
            full = [
                m.port
                for m in (part.members if part else ())
                if isinstance(m.port, int)
                and part is not None
                and part.effective_membership(m) is not Membership.LIMITED
                and lids.get(m.port)
            ]
            if len(full) < 2:
                step.log.append(f"P_Key {cls.pkey:#06x}: fewer than two full members, not checked")
                continue
            src, dst = lids[full[0]], lids[full[1]]
            deadline = time.monotonic() + options.verify_timeout
            seen: int | str | None = None
            while True:
                try:
                    records = diags.path(src, dst, pkey=cls.pkey).records  # type: ignore[arg-type]
                    seen = records[0].sl if records else "no path"
                except DiagError as exc:
                    seen = str(exc)
                if seen == cls.sl or time.monotonic() > deadline:
                    break
                time.sleep(options.poll_interval)
            step.log.append(f"P_Key {cls.pkey:#06x} {format_guid(full[0])} → {format_guid(full[1])}: SL {seen}")
            if seen != cls.sl:
                mismatches.append(f"P_Key {cls.pkey:#06x}: expected SL {cls.sl}, saw {seen}")
        step.duration_s = time.monotonic() - t
        self._qos_outcome(step, mismatches, result)

    def _verify_vl(self, wanted: QosOptions, result: PushResult, options: PushOptions) -> None:
        """SL2VL and VLArb tables read back from every HCA and switch port equal the rendered options.

        OpenSM programs them on its sweep after the reload, so the read is repeated until it
        matches or ``verify_timeout`` passes; a mismatch then rolls back like a partition mismatch.
        """
        t = time.monotonic()
        step = PushStep("verify-vl", status="running")
        result.steps.append(step)
        diags = self.host.diags(timeout=options.diag_timeout)
        ports = ports_to_check(diags.ibnetdiscover())
        env = getattr(diags, "env", None)
        mad = shared_session(env, timeout=options.diag_timeout) if options.use_mad and env is not None else None
        deadline = time.monotonic() + options.verify_timeout
        used: list[str] = []
        while True:
            mismatches = verify_qos_tables(diags, ports, wanted, mad=mad, mad_timeout=60.0, used=used)
            if not mismatches or time.monotonic() > deadline:
                break
            time.sleep(max(options.poll_interval, 0.5))
        step.log.append(
            f"read SL2VL and VLArb of {len(ports)} ports ({'; '.join(dict.fromkeys(used))}) "
            f"({sum(p.switch for p in ports)} switch, {sum(not p.switch for p in ports)} HCA): "
            f"{len(mismatches)} differ from the rendered options"
        )
        step.log.append(f"rendered: {render_qos_options(wanted)}")
        step.log.append("VLHighLimit not compared (ibsim ignores it; see docs/operations.md)")
        step.duration_s = time.monotonic() - t
        self._qos_outcome(step, mismatches[:50], result)

    def _qos_outcome(self, step: PushStep, mismatches: list[str], result: PushResult) -> None:
        """Close a QoS verification step; on a mismatch restore the last known good files."""
        if not mismatches:
            step.status = "ok"
            return
        step.status = "failed"
        step.log += mismatches
        result.mismatches += mismatches
        rollback = PushStep("rollback", status="running")
        result.steps.append(rollback)
        restored = self.host.artefacts.rollback()
        rollback.log.append(f"restored {', '.join(restored) or 'nothing'}")
        if OPENSM_CONF in restored:
            self.host.restart()
            rollback.restarted_opensm = True
            rollback.log.append("restarted OpenSM to load the restored opensm.conf")
        elif restored:
            self.host.reload()
        rollback.status = "ok"
        result.outcome = "rolled_back"

    # -- port administration ------------------------------------------------------------------

    def _port_step(self, wanted: Any, result: PushResult) -> None:
        t = time.monotonic()
        step = PushStep(f"port-admin:{wanted.label}", status="running")
        result.steps.append(step)
        try:
            outcome = self.ports.set_port_state(
                wanted.switch, wanted.port, wanted.enabled, width=wanted.width, speed=wanted.speed
            )
        except DriverError as exc:
            outcome = PortStateResult(wanted.switch, wanted.port, wanted.enabled, False, False)
            outcome.log.append(str(exc))
        step.log += outcome.log
        step.duration_s = time.monotonic() - t
        if not outcome.verified:
            step.status = "failed"
            result.mismatches.append(f"{wanted.label}: not {wanted.describe()}")
            result.outcome = "failed"
            return
        step.status = "ok" if outcome.changed else "skipped"
        if outcome.changed and result.outcome == "unchanged":
            result.outcome = "verified"


@register_driver("opensm")
def opensm_driver(fabric: Any) -> OpenSmDriver:
    """The driver of a fabric managed by an OpenSM on this host (paths in ``fabric.config``)."""
    config = fabric.config or {}
    return OpenSmDriver(LocalOpenSmHost(config), diag_timeout=diag_timeout_of(config))
