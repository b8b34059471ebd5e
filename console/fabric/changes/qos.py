"""The fabric's QoS table as operators edit it: permission, validation, lint, audit, affected ports.

Saving the table only records desired state (like a partition or a port state); a change request
pushes it, and the push verifies the SL2VL and VL arbitration tables on the ports
(:mod:`console.fabric.opensm.qos_verify`). A table that does not render to lint-clean
``opensm.conf`` QoS options is refused here, so a broken policy never reaches OpenSM.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from console.fabric import hooks
from console.fabric.changes.desired import applied_of, build_desired, diff_artefacts, qos_table_of, render_artefacts
from console.fabric.changes.locks import fabric_for_update
from console.fabric.changes.partitions import save_audited
from console.fabric.models import Fabric, FabricQos
from console.fabric.opensm.conf import OpenSmConfig, lint_opensm_conf, render_opensm_conf
from console.fabric.opensm.qos import render_qos_options
from console.fabric.opensm.qos_table import DEFAULT_TABLE, QosTable
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid
from console.tenancy.models import Principal
from console.tenancy.permissions import require_operator
from designer.errors import DesignerError
from designer.services import revision_graph


def parse_table(data: Any) -> QosTable:
    """Operator input → a table that renders lint-clean, or :class:`Invalid` naming every problem."""
    if not isinstance(data, dict):
        raise Invalid("the QoS table must be an object", fields={"classes": ["object expected"]})
    try:
        table = QosTable.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        detail = f"malformed QoS table: {exc}"
        raise Invalid(detail, fields={"classes": [detail]}) from None
    errors = table.validate()
    if not errors:
        # Lint exactly what OpenSM would read: the options inside an opensm.conf.
        text = render_opensm_conf(OpenSmConfig(qos=table.options()))
        errors = [str(p) for p in lint_opensm_conf(text)]
    if errors:
        raise Invalid("QoS table refused: " + "; ".join(errors), fields={"classes": errors})
    return table


def _sls_in_use(fabric: Fabric) -> dict[int, list[int]]:
    """SL → reservations whose partitions carry it now (they keep it until they end)."""
    used: dict[int, list[int]] = {}
    for request in hooks.requested_partitions(fabric.pk):
        used.setdefault(int(request.get("sl", 0)), []).append(int(request["reservation_id"]))
    return used


def set_qos_table(actor: Actor, principal: Principal, fabric: Fabric, data: Any) -> QosTable:
    """Store ``fabric``'s QoS table (desired state only; audited ``fabric.qos.create/update``).

    Refused (409) when a live reservation's SL would no longer belong to any class: its jobs were
    told to use that SL, and it would silently fall to the best-effort VL.
    """
    require_operator(principal, to="change fabrics")
    table = parse_table(data)
    class_sls = {c.sl for c in table.classes}
    with transaction.atomic():
        fabric_for_update(fabric.pk)
        # Every grant reads the saved table FOR SHARE (scheduling.services.grant): under this lock
        # no grant is between reading it and committing its SL, so the check below sees every
        # reservation granted with the old table and later grants read the new one. (A first save
        # has no row to lock: a grant reading "no table" in the same instant is not waited for.)
        row = FabricQos.objects.select_for_update().filter(fabric=fabric).first()
        orphaned = {sl: ids for sl, ids in _sls_in_use(fabric).items() if sl and sl not in class_sls}
        if orphaned:
            detail = "; ".join(
                f"SL {sl} is used by reservation(s) {', '.join(str(i) for i in sorted(ids))}"
                for sl, ids in sorted(orphaned.items())
            )
            raise Conflict(f"live reservations use SLs the new table drops: {detail}", fields={"classes": [detail]})
        save_audited(
            actor,
            FabricQos,
            row,
            keys={"fabric": fabric},
            values={"table": table.to_json()},
            action="fabric.qos",
            conflict=f"fabric {fabric.name!r} already has a QoS table",
        )
    return table


def table_sl(stored: Any, priority_class: str) -> int | None:
    """The SL a saved QoS table (its JSON, ``FabricQos.table``) gives ``priority_class`` (None:
    the table has no row for it)."""
    return QosTable.from_json(stored).sl_of(priority_class)


def affected_ports(fabric: Fabric) -> dict[str, Any]:
    """The ports a QoS table change reprograms: SL2VL and VL arbitration are fabric-wide options,
    so every cabled switch port and every HCA port of the design (counted from its links)."""
    try:
        graph = revision_graph(fabric.revision)
    except (DesignerError, KeyError, TypeError, ValueError):
        return {"switch_ports": 0, "hca_ports": 0, "switches": []}
    switch_ports: set[tuple[str, int]] = set()
    hca_ports: set[tuple[str, int]] = set()
    for link in graph.links:
        for device, port in link.ends():
            (switch_ports if graph.is_switch(device) else hca_ports).add((device, port))
    per_switch: dict[str, int] = {}
    for device, _ in switch_ports:
        per_switch[device] = per_switch.get(device, 0) + 1
    return {
        "switch_ports": len(switch_ports),
        "hca_ports": len(hca_ports),
        "switches": [{"name": name, "ports": n} for name, n in sorted(per_switch.items())],
    }


def pending_diff(fabric: Fabric) -> str:
    """The diff a change request would show now (desired artefacts against applied ones)."""
    try:
        desired = render_artefacts(build_desired(fabric))
    except (ValueError, Conflict) as exc:
        return f"# desired state does not render: {exc}\n"
    applied = applied_of(fabric)
    return diff_artefacts(applied.artefacts if applied else {}, desired)


def qos_view(fabric: Fabric) -> dict[str, Any]:
    """What ``GET /api/fabrics/{id}/qos/`` shows: the table, whether it is the default, what it
    renders, the ports a push reprograms and the diff it would push."""
    table = qos_table_of(fabric)
    options = table.options()
    return {
        "fabric": fabric.pk,
        "is_default": not FabricQos.objects.filter(fabric=fabric).exists(),
        "table": table.to_json(),
        "default": DEFAULT_TABLE.to_json(),
        "rendered": render_qos_options(options),
        "affected_ports": affected_ports(fabric),
        "pending_diff": pending_diff(fabric),
    }
