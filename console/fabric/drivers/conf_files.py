"""The ``opensm.conf`` and ``qos-policy.conf`` a push writes: the options the console sets,
edited into the operator's file in place (every other line kept as written)."""

from __future__ import annotations

from collections.abc import Mapping

from console.fabric.opensm.conf import NULL, edit_opensm_conf, parse_opensm_conf
from console.fabric.opensm.files import Artefact, ArtefactStore
from console.fabric.opensm.push_types import SmKeys
from console.fabric.opensm.qos import (
    QosOptions,
    QosPolicy,
    parse_qos_options,
    render_qos_options,
    render_qos_policy,
)

QOS_POLICY = "qos-policy.conf"
OPENSM_CONF = "opensm.conf"


def conf_options(
    store: ArtefactStore,
    qos: QosPolicy | None,
    qos_options: QosOptions | None,
    keys: SmKeys | None,
    host_needs: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The ``opensm.conf`` options a push sets: QoS switched on with its policy file and the
    fabric's QoS table (else the live or default ``qos_*`` values) when QoS is in use, the
    fabric's management keys when it has them, and what the host needs (the lab reads OpenSM's
    log, so it needs ``force_log_flush TRUE``). Every other option is the operator's."""
    wanted: dict[str, str] = dict(host_needs or {})
    if qos is not None or qos_options is not None:
        live = parse_opensm_conf(store.read(OPENSM_CONF) or "")
        wanted.update({"qos": "TRUE", "qos_policy_file": str(store.path(QOS_POLICY))})
        if qos_options is not None:
            wanted.update(render_qos_options(qos_options))
        else:
            # The live values when they make a valid set (OpenSM's own "unset" ones, (null),
            # qos_max_vls 0, qos_high_limit -1, do not), else the console's defaults.
            defaults = render_qos_options(QosOptions())
            current = {key: live.get(key, NULL) for key in defaults}
            usable = NULL not in current.values() and not isinstance(parse_qos_options(current), list)
            wanted.update(current if usable else defaults)
    if keys is not None:
        wanted.update(keys.options())
    return wanted


def conf_artefacts(
    store: ArtefactStore,
    qos: QosPolicy | None,
    qos_options: QosOptions | None,
    keys: SmKeys | None,
    host_needs: Mapping[str, str] | None = None,
) -> list[Artefact]:
    """``qos-policy.conf`` (when QoS is in use) and ``opensm.conf`` edited in place
    (:func:`~console.fabric.opensm.conf.edit_opensm_conf`: comments and the operator's options
    kept as written)."""
    out = []
    if qos is not None or qos_options is not None:
        out.append(Artefact("qos-policy", QOS_POLICY, render_qos_policy(qos or QosPolicy())))
    wanted = conf_options(store, qos, qos_options, keys, host_needs)
    if wanted:
        out.append(Artefact("opensm-conf", OPENSM_CONF, edit_opensm_conf(store.read(OPENSM_CONF) or "", wanted)))
    return out
