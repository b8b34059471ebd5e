"""The audit log in words a person reads: one sentence per entry, from its action code and data.

Plain code, no Django: ``sentence()`` takes the entry's fields and a lookup of names by id (pools,
fabrics, tenants) that the page fetches once for all rows. Each action code has one or more
wordings tried in order; the first whose fields are all known wins, so "alice released
reservation train-7 (32 GPUs) on fabric lab" degrades to "alice released reservation train-7"
when the data lacks the GPUs. A code without a wording still reads as a sentence (``FALLBACK``);
tests/tenancy/test_audit_words.py checks every code the code base emits has its own wording.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

Wording = tuple[str, ...]

_RESERVATION = "reservation {label}"
_SIZED = "reservation {label} ({gpus} GPUs) on fabric {fabric}"

#: Fields: {actor}, {object} (the object's name as recorded), {id}, {tenant}, and the entry's data
#: (``after`` over ``before``); ``<x>_id`` fields also give ``{x}``, the name of that object;
#: {label} is the data's ``name`` if any, else {object}.
WORDINGS: dict[str, Wording] = {
    # tenants, members, tokens, logins
    "tenant.create": ("{actor} created tenant {object}",),
    "tenant.update": ("{actor} updated tenant {object}",),
    "tenant.delete": ("{actor} deleted tenant {object}",),
    "member.create": ("{actor} added {object} to tenant {tenant} as {role}", "{actor} added member {object}"),
    "member.update": ("{actor} made {object} {role} in tenant {tenant}", "{actor} updated member {object}"),
    "member.remove": ("{actor} removed {object} from tenant {tenant}", "{actor} removed member {object}"),
    "member.password_change": ("{actor} changed the password of {object}",),
    "membership.create": ("{actor} added {object} to tenant {tenant}", "{actor} added member {object}"),
    "membership.update": ("{actor} updated the membership of {object}",),
    "membership.delete": ("{actor} removed the membership of {object}",),
    "token.issue": ("{actor} issued API token {name}", "{actor} issued API token {object}"),
    "token.revoke": ("{actor} revoked API token {name}", "{actor} revoked API token {object}"),
    "token.prune": ("{actor} pruned expired API token {name}", "{actor} pruned an expired API token"),
    "login.lockout": ("Login {object} locked out after repeated failures",),
    "login.throttle": ("Logins from {object} throttled after repeated failures",),
    "login.unlock": ("{actor} unlocked login {object}",),
    # notifications (a webhook's {object} reads "webhook <name>")
    "webhook.create": ("{actor} registered webhook {url} for tenant {tenant}", "{actor} registered {object}"),
    "webhook.update": ("{actor} changed webhook {url} of tenant {tenant}", "{actor} changed {object}"),
    "webhook.delete": ("{actor} deleted webhook {url} of tenant {tenant}", "{actor} deleted {object}"),
    "webhook.test": ("{actor} sent a test event to {object}",),
    "notify.preference.update": ("{actor} changed the e-mail notification preferences of {object}",),
    # pools, inventory, quotas
    "pool.create": ("{actor} created pool {object}",),
    "pool.delete": ("{actor} deleted pool {object}",),
    "pool.nodes": ("{actor} changed the nodes of pool {object}",),
    "pool.prices": ("{actor} changed the GPU-hour prices of pool {object}",),
    "pool.patience": (
        "{actor} set the default patience of pool {object} to {default_max_wait} s (queued requests wait that long for a packed placement)",
        "{actor} changed the default patience of pool {object}",
    ),
    "pool.power_policy": (
        "{actor} set the power policy of pool {object} (enabled: {enabled}, dry run: {dry_run})",
        "{actor} changed the power policy of pool {object}",
    ),
    "pool.power_policy_run": (
        "{actor} ran the power policy of pool {object}: {summary}",
        "{actor} ran the power policy of pool {object}",
    ),
    "node.power_pin": ("{actor} pinned node {object} on: {reason}", "{actor} pinned node {object} on"),
    "node.power_unpin": ("{actor} unpinned node {object}",),
    "node.state": ("{actor} set node {object} {state}", "{actor} changed the state of node {object}"),
    "node.path_lost": ("node {object} lost its path on the fabric: {path_lost}", "node {object} lost its path"),
    "node.path_back": ("node {object} has its path on the fabric back", "node {object} has its path back"),
    "node.bmc_set": ("{actor} set the {object}",),
    "node.power_on": ("{actor} powered on node {object}: {reason}", "{actor} powered on node {object}"),
    "node.power_off": ("{actor} powered off node {object}: {reason}", "{actor} powered off node {object}"),
    "node.power_settled": (
        "{actor} reported node {object} {power_state}: {reason}",
        "{actor} reported node {object} settled",
    ),
    "node.power_failed": ("a power action on node {object} failed: {reason}", "a power action on node {object} failed"),
    "node.power": ("{actor} recorded node {object} as {power_state}", "{actor} recorded the power of node {object}"),
    "inventory.import": ("{actor} imported the node inventory",),
    "inventory.update_guids": ("{actor} updated the HCA port GUIDs of the inventory",),
    "quota.set": (
        "{actor} set the quota of {tenant} in pool {pool} to {guaranteed_gpus} GPUs guaranteed"
        " + {borrow_limit_gpus} GPUs borrowable",
        "{actor} set a quota of {tenant}",
    ),
    "quota.create": ("{actor} created a quota of {tenant} in pool {pool}", "{actor} created a quota of {tenant}"),
    "quota.update": ("{actor} changed a quota of {tenant} in pool {pool}", "{actor} changed a quota of {tenant}"),
    "quota.delete": ("{actor} removed the quota of {tenant} in pool {pool}", "{actor} removed a quota of {tenant}"),
    # reservations
    "reservation.create": (f"{{actor}} reserved {_SIZED}", f"{{actor}} requested {_RESERVATION}"),
    "reservation.queue": (
        "{actor} queued reservation {label} ({gpus} GPUs) in pool {pool} until it fits",
        f"{{actor}} queued {_RESERVATION}",
    ),
    "reservation.reject": (f"{{actor}}'s {_RESERVATION} was refused: {{reason}}", f"{_RESERVATION} was refused"),
    "reservation.start": (f"{_SIZED} started", f"{_RESERVATION} started"),
    "reservation.ready": (f"{_SIZED} is ready", f"{_RESERVATION} is ready"),
    "reservation.virtual_guids": (f"{{actor}} changed the virtual GUIDs (pod VFs) of {_RESERVATION}",),
    "reservation.extend": ("{actor} extended reservation {label} to {end} UTC", f"{{actor}} extended {_RESERVATION}"),
    "reservation.release": (f"{{actor}} released {_SIZED}", f"{{actor}} released {_RESERVATION}"),
    "reservation.released": (f"{_SIZED} was wound down", f"{_RESERVATION} was wound down"),
    "reservation.cancel": (f"{{actor}} cancelled {_SIZED}", f"{{actor}} cancelled {_RESERVATION}"),
    "reservation.preempt": (f"{_SIZED} was preempted: {{reason}}", f"{_RESERVATION} was preempted"),
    "reservation.expire": (f"{_SIZED} ended at its end time", f"{_RESERVATION} ended at its end time"),
    "reservation.fabric_failed": (f"{_RESERVATION} failed on the fabric: {{reason}}", f"{_RESERVATION} failed"),
    # designs
    "design.create": ("{actor} created design {object}",),
    "design.import": ("{actor} imported design {object}",),
    "design.import_queued": ("{actor} queued the import of a large dump ({object})",),
    "design.delete": ("{actor} deleted design {object}",),
    "design.revision.create": ("{actor} saved revision {object}",),
    "catalogue.save": ("{actor} saved catalogue entry {object}",),
    "catalogue.delete": ("{actor} deleted catalogue entry {object}",),
    # fabrics
    "fabric.create": ("{actor} created fabric {object}",),
    "fabric.update": ("{actor} updated fabric {object}",),
    "fabric.delete": ("{actor} deleted fabric {object}",),
    # sites, the links between them, tenants' datasets at them
    "site.create": ("{actor} created site {object} ({location})", "{actor} created site {object}"),
    "site.update": ("{actor} updated site {object}",),
    "site.delete": ("{actor} deleted site {object}",),
    "site_link.create": (
        "{actor} linked sites {object} ({kind}, {latency_us} µs, {bandwidth_gbps} Gb/s)",
        "{actor} linked sites {object}",
    ),
    "site_link.update": (
        "{actor} changed the link between sites {object} ({kind}, {latency_us} µs, {bandwidth_gbps} Gb/s)",
        "{actor} changed the link between sites {object}",
    ),
    "site_link.delete": ("{actor} removed the link between sites {object}",),
    "dataset.create": ("{actor} registered dataset {object} of tenant {tenant}", "{actor} registered dataset {object}"),
    "dataset.update": ("{actor} updated dataset {object} of tenant {tenant}", "{actor} updated dataset {object}"),
    "dataset.delete": ("{actor} deleted dataset {object} of tenant {tenant}", "{actor} deleted dataset {object}"),
    "fabric.discover": (
        "{actor} ran discovery {discovery_id} on fabric {object}: {switches} switches, {links} links",
        "{actor} ran discovery on fabric {object}",
    ),
    "fabric.discover_requested": ("{actor} asked for a discovery of fabric {object} (job {job})",),
    "fabric.validate_requested": ("{actor} asked for a validation of fabric {object} (run {validation})",),
    "fabric.validated": (
        "validation {validation} of fabric {object} {state}: ok {ok}, failed {failed}",
        "validation of fabric {object} ended",
    ),
    "fabric.lab.start": ("{actor} started the lab of fabric {object}",),
    "fabric.lab.stop": ("{actor} stopped the lab of fabric {object}",),
    "fabric.lab.standby": ("{actor} started a standby subnet manager in the lab of fabric {object}",),
    "fabric.failover_drill": (
        "{actor} ran a subnet-manager failover drill on fabric {object} ({mode}): {new_master} took over "
        "in {takeover_s} s, {ports_checked} ports checked",
        "{actor} ran a subnet-manager failover drill on fabric {object} ({mode})",
    ),
    "console.secrets_rotated": (
        "{actor} re-encrypted the stored secrets under the current keys: {bmc_passwords} BMC passwords, "
        "{fabric_keys} fabric keys, {webhook_secrets} webhook secrets",
    ),
    "fabric.paused": (
        "{actor} paused the reconciler of fabric {object}: {reason}",
        "{actor} paused the reconciler of fabric {object}",
    ),
    "fabric.resumed": ("{actor} resumed the reconciler of fabric {object} after reviewing what it changes",),
    "fabric.lab.unplug": ("{actor} unplugged the cable at {node} port {port} on fabric {object}",),
    "fabric.lab.replug": ("{actor} plugged the cable back at {node} port {port} on fabric {object}",),
    "fabric.lab.counters": ("{actor} set error counters at {node} port {port} on fabric {object}",),
    "fabric.lab.phy": ("{actor} recorded a PHY reading at {node} port {port} on fabric {object}",),
    "fabric.partition.create": ("{actor} declared partition {object}",),
    "fabric.partition.update": ("{actor} changed partition {object}",),
    "fabric.partition.delete": ("{actor} deleted partition {object}",),
    "fabric.partition.adopt": ("{actor} kept partition {object}, found on the SM host, as operator-owned",),
    "fabric.partition.dropped": ("{actor} dropped partition {object} from the SM host's file",),
    "fabric.health_policy": ("{actor} set the health policy of fabric {object}",),
    "fabric.port_health": (
        "the health policy decided {kind} of {switch} port {port} on fabric {object} (dry run {dry_run})",
        "the health policy decided about a port of fabric {object}",
    ),
    "fabric.port.create": ("{actor} set port {object}",),
    "fabric.port.update": ("{actor} changed the port setting {object}",),
    "fabric.port.delete": ("{actor} cleared the port setting {object}",),
    "fabric.qos.create": ("{actor} set the QoS table ({object})",),
    "fabric.qos.update": ("{actor} changed the QoS table ({object})",),
    # change requests (partition pushes) and their steps
    "fabric.applied.stale": (
        "{actor} found fabric {object} no longer carries change request {change} as verified: {mismatch}",
        "{actor} found fabric {object} no longer carries its applied state",
    ),
    "fabric.change.create": ("{actor} requested change {id}: {reason}", "{actor} requested change {id}"),
    "fabric.change.approve": ("{actor} approved change request {id}",),
    "fabric.change.cancel": ("{actor} cancelled change request {id}",),
    "fabric.change.requeue": ("Change request {id} requeued (attempt {attempts})", "Change request {id} requeued"),
    "fabric.change.resume": ("Change request {id} resumed (attempt {attempt})", "Change request {id} resumed"),
    "fabric.change.superseded": ("Change request {id} superseded by change request {by}",),
    "fabric.change.coalesce": ("{actor} folded a newer desired state into waiting change request {id}",),
    "fabric.change.lease_released": ("Change request {id} released by a worker that is gone",),
    "fabric.change.applied": ("Change request {id} applied and verified on the fabric",),
    "fabric.change.unchanged": ("Change request {id} found nothing to push",),
    "fabric.change.previewed": ("Change request {id} previewed (dry run)",),
    "fabric.change.failed": ("Change request {id} failed: {error}", "Change request {id} failed"),
    "fabric.change.refused": ("Change request {id} refused: {error}", "Change request {id} refused"),
    "agent.create": ("{actor} created agent {object}",),
    "agent.revoke": ("{actor} revoked agent {object}",),
    "agent.rotate": ("{actor} gave agent {object} a new token",),
    "agent.refused": ("Agent {object} refused: {why}", "Agent {object} refused"),
    "fabric.change.rolled_back": ("Change request {id} failed and was rolled back",),
    "fabric.change.step.ok": ("Change request {id} step '{step}' succeeded",),
    "fabric.change.step.failed": ("Change request {id} step '{step}' failed",),
    "fabric.change.step.skipped": ("Change request {id} step '{step}' skipped",),
    "fabric.change.step.running": ("Change request {id} step '{step}' running",),
    "fabric.change.step.pending": ("Change request {id} step '{step}' pending",),
    # telemetry events
    "telemetry.event.open": ("Event opened: {object}",),
    "telemetry.event.acknowledge": ("{actor} acknowledged event {object}",),
    "telemetry.event.resolve": ("{actor} resolved event {object}",),
    "telemetry.event.auto_resolve": ("Event resolved by itself: {object}",),
    "telemetry.event.update": ("Event grew: {object}",),
}

#: The sentence of a code without a wording of its own.
FALLBACK = "{actor}: {action} on {object_type} {object}"


class _Missing(KeyError):
    pass


class _Strict(string.Formatter):
    def get_value(self, key: int | str, args: Any, kwargs: Mapping[str, Any]) -> Any:
        value = kwargs.get(str(key))
        if value is None or value == "":
            raise _Missing(key)
        return value


_FORMATTER = _Strict()


def fields(
    *,
    actor: str,
    object_repr: str,
    object_id: str,
    tenant: str | None,
    before: Any,
    after: Any,
    names: Mapping[str, Mapping[int, str]],
) -> dict[str, Any]:
    """The fields a wording may use: the entry's own, then its data with ``<x>_id`` resolved to names."""
    data: dict[str, Any] = {}
    for part in (before, after):
        if isinstance(part, dict):
            data.update(part)
    out: dict[str, Any] = {k: v for k, v in data.items() if isinstance(v, str | int | float)}
    for key, value in data.items():
        kind = key.removesuffix("_id")
        if kind != key and kind in names and isinstance(value, int):
            out[kind] = names[kind].get(value, f"#{value}")
    out.update(actor=actor, object=object_repr or (f"#{object_id}" if object_id else ""), id=object_id)
    out["label"] = data.get("name") or out["object"]  # what a person calls it (a reservation's name)
    if tenant:
        out["tenant"] = tenant
    return out


def sentence(action: str, object_type: str, values: Mapping[str, Any]) -> str:
    """The entry in words: the first wording of ``action`` whose fields are all known."""
    for wording in WORDINGS.get(action, ()):
        try:
            text = _FORMATTER.format(wording, **values)
        except _Missing:
            continue
        # a sentence opens with a capital, but a user's name stays as it is spelt
        return text if wording.startswith("{") else text[:1].upper() + text[1:]
    known = {**values, "action": action, "object_type": object_type or "object"} | _blank(values)
    return _FORMATTER.vformat(FALLBACK, (), known)


def _blank(values: Mapping[str, Any]) -> dict[str, str]:
    """The fallback never fails: what it names but the entry lacks reads as a dash."""
    return {key: "—" for key in ("actor", "object") if not values.get(key)}
