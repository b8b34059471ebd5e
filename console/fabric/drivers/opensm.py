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

import time
from typing import Any

from console.fabric.diags.mad import shared_session
from console.fabric.diags.runner import DiagError
from console.fabric.drivers.base import (
    DesiredFabric,
    DriverError,
    PortStateResult,
    Progress,
    no_progress,
)
from console.fabric.drivers.conf_files import OPENSM_CONF, QOS_POLICY, conf_artefacts
from console.fabric.drivers.hosts import LabHost, LocalOpenSmHost, OpenSmHost, ProgressTarget
from console.fabric.drivers.registry import diag_timeout_of, register_driver
from console.fabric.drivers.switch import SmpPortAdmin
from console.fabric.opensm.conf import classify_changes, parse_opensm_conf
from console.fabric.opensm.files import ArtefactStore
from console.fabric.opensm.isolation_audit import AuditPlan, ProbeResult
from console.fabric.opensm.lint import ArtefactRejected, LintProblem, format_guid
from console.fabric.opensm.partitions import Membership
from console.fabric.opensm.partitions_file import lint_file, live_differences, parse_file, render_file
from console.fabric.opensm.probe import probe_isolation
from console.fabric.opensm.push import PushOptions, PushResult, PushStep, push_partitions
from console.fabric.opensm.qos import QosOptions, QosPolicy, render_qos_options
from console.fabric.opensm.qos_verify import ports_to_check, verify_qos_tables
from console.fabric.opensm.verify import verify_partitions

PARTITIONS = "partitions.conf"
__all__ = ["LabHost", "LocalOpenSmHost", "OpenSmDriver", "OpenSmHost", "conf_artefacts"]


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

    def probe_isolation(self, plan: AuditPlan, *, options: PushOptions | None = None) -> ProbeResult:
        """The isolation audit's questions, asked from the SM host (:mod:`.opensm.probe`)."""
        return probe_isolation(self.host, plan, options or PushOptions(diag_timeout=self.diag_timeout))

    def read_live(self) -> dict[str, str]:
        """The SM host's files as they are now: partitions.conf, qos-policy.conf, opensm.conf."""
        store = self.host.artefacts
        found = {name: store.read(name) for name in (PARTITIONS, QOS_POLICY, OPENSM_CONF)}
        return {name: text for name, text in found.items() if text is not None}

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
        """Re-verify without writing: the live file must carry the desired partitions (others in
        it are the operator's), then the ports must show them."""
        options = options or PushOptions(diag_timeout=self.diag_timeout)
        wanted = parse_file(render_file(desired.partitions))
        differs = live_differences(self.host.artefacts.read(PARTITIONS), wanted)
        if differs:
            return differs
        diags = self.host.diags(timeout=options.diag_timeout)
        return verify_partitions(self.host, diags, wanted, [], options, PushStep("verify"))

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
        target = ProgressTarget(self.host, progress)
        partitions = list(desired.partitions)
        # Nothing is written unless every artefact of the change lints clean.
        try:
            partitions_ok = not lint_file(render_file(partitions, operator=desired.operator))
        except ValueError:
            partitions_ok = False
        if not partitions_ok:
            progress("render", "running")
            return push_partitions(
                target, partitions, options, operator=desired.operator, dropped=desired.dropped
            )  # refused, with precise steps
        pre: list[PushStep] = []
        qos_on = desired.qos is not None or desired.qos_options is not None
        conf_on = qos_on or options.keys is not None or self._needs_conf(store, options)
        conf_before = store.read(OPENSM_CONF)
        if conf_on and (qos_on or self._conf_pending(desired, store, options)):
            name = "qos" if qos_on else "conf"
            progress(name, "running")
            step, problems = self._swap_conf(name, desired, store, options)
            pre.append(step)
            if problems:
                return _refused(pre, problems, started)
        progress("render", "running")
        result = push_partitions(target, partitions, options, operator=desired.operator, dropped=desired.dropped)
        result.steps[:0] = pre
        if result.outcome == "staged":  # a standby: nothing of the wire is its to check
            if conf_on:
                store.mark_good([QOS_POLICY, OPENSM_CONF] if qos_on else [OPENSM_CONF])
            result.duration_s = round(time.monotonic() - started, 3)
            return result
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
            if conf_on:
                store.mark_good([QOS_POLICY, OPENSM_CONF] if qos_on else [OPENSM_CONF])
            for wanted in sorted(desired.port_admin):
                progress(f"port-admin:{wanted.label}", "running")
                self._port_step(wanted, result)
        result.duration_s = round(time.monotonic() - started, 3)
        return result

    # -- QoS ---------------------------------------------------------------------------------

    def _swap_conf(
        self, name: str, desired: DesiredFabric, store: ArtefactStore, options: PushOptions
    ) -> tuple[PushStep, list[LintProblem]]:
        """Swap ``qos-policy.conf`` and ``opensm.conf`` (edited in place), then SIGHUP, or restart
        OpenSM when a non-reloadable option changed (named in the step's log)."""
        t = time.monotonic()
        step = PushStep(name, status="running")
        keys = options.keys
        qos = desired.qos or (QosPolicy() if desired.qos_options is not None else None)
        try:
            artefacts = conf_artefacts(store, qos, desired.qos_options, keys, self._host_needs(options))
        except ValueError as exc:
            step.status, step.log = "failed", [str(exc)]
            return step, [LintProblem(QOS_POLICY, None, "render", str(exc))]
        old_conf = store.read(OPENSM_CONF) or ""
        # A file that is not the last known good was written by a push that never finished (or
        # edited by hand): OpenSM may not run it yet, so it is reloaded even if nothing changes now.
        unapplied = store.has_lkg() and store.read_lkg(OPENSM_CONF) not in (None, old_conf)
        try:
            swap = store.swap(artefacts)
        except ArtefactRejected as exc:
            step.status, step.log = "failed", [str(p) for p in exc.problems]
            return step, exc.problems
        change = classify_changes(old_conf, store.read(OPENSM_CONF) or "")
        step.log.append(f"replaced {', '.join(swap.changed) or 'nothing'}")
        if keys is not None:
            step.log.append("management keys (m_key, sm_key, sa_key) set in opensm.conf")
        if change.needs_restart:
            step.log.append(
                "restarting OpenSM: non-reloadable options changed: " + ", ".join(change.restart_required_by)
            )
            self.host.restart()
            step.restarted_opensm = True
        elif swap.changed or unapplied:
            step.log.append(
                "SIGHUP sent (QoS policy and reloadable options)" + ("" if swap.changed else ": not applied yet")
            )
            self.host.reload()
        step.status, step.duration_s = "ok", time.monotonic() - t
        return step, []

    def _conf_pending(self, desired: DesiredFabric, store: ArtefactStore, options: PushOptions) -> bool:
        """True when opensm.conf must be written or reloaded: the options the console sets
        differ from the live file, or the live file is not the last known good."""
        qos = desired.qos or (QosPolicy() if desired.qos_options is not None else None)
        try:
            wanted = conf_artefacts(store, qos, desired.qos_options, options.keys, self._host_needs(options))
        except ValueError:
            return True  # the step says why
        if any(store.read(a.filename) != a.text for a in wanted):
            return True
        return store.has_lkg() and store.read_lkg(OPENSM_CONF) not in (None, store.read(OPENSM_CONF))

    def _needs_conf(self, store: ArtefactStore, options: PushOptions) -> bool:
        """True when opensm.conf lacks what the host needs (an operator's file, say) or the
        subnet-manager HA options of this push."""
        live = parse_opensm_conf(store.read(OPENSM_CONF) or "")
        return any(live.get(k) != v for k, v in self._host_needs(options).items())

    def _host_needs(self, options: PushOptions) -> dict[str, str]:
        """What the host needs in opensm.conf, and this push's HA options for this host."""
        needs = getattr(self.host, "conf_needs", None)
        return {**(dict(needs()) if callable(needs) else {}), **options.ha_options()}

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
