"""A fabric's QoS table as operators edit it: class → SL, VL, arbitration table and weight.

Thin: :mod:`console.fabric.changes.qos` validates, lints, stores and audits. The page shows what
the table renders to (the ``qos_*`` options), the ports a push reprograms and the diff a change
would push; "Preview" and "Push" create a change request (dry run or real) and open its page, the
same diff and steps every fabric change shows. Operators edit; auditors read; others get 404.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from console.fabric import changes
from console.fabric.changes.qos import qos_view, set_qos_table
from console.fabric.models import Fabric
from console.fabric.opensm.qos_table import CLASSES
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.models import Role
from console.web.context import principal_for, refuse_readers

FIELDS = ("sl", "vl", "weight")


def _number(text: str | None) -> int | str:
    """A form field as an int when it is one (else the text, so validation names it)."""
    value = (text or "").strip()
    return int(value) if value.lstrip("-").isdigit() else value


def _table_from_form(post: Any) -> dict[str, Any]:
    return {
        "max_vls": _number(post.get("max_vls")),
        "high_limit": _number(post.get("high_limit")),
        "classes": {
            name: {
                **{f: _number(post.get(f"{name}-{f}")) for f in FIELDS},
                "table": post.get(f"{name}-table", ""),
            }
            for name in CLASSES
        },
    }


@login_required
def fabric_qos(request: HttpRequest, fabric_id: int) -> HttpResponse:
    """The QoS table with its rendered options, affected ports and pending diff; POST (operators)
    saves it, previews the change (dry run) or pushes it."""
    principal = principal_for(request)
    if principal.role not in (Role.OPERATOR, Role.AUDITOR):
        raise Http404
    fabric = get_object_or_404(Fabric, pk=fabric_id)
    errors: list[str] = []
    posted: dict[str, Any] | None = None
    if request.method == "POST":
        refuse_readers(request)
        actor = Actor.for_user(request.user)
        action = request.POST.get("action", "save")
        try:
            if action in ("preview", "push"):
                change = changes.request_change(
                    actor, principal, fabric, dry_run=action == "preview", reason="QoS table"
                )
                return redirect("web:fabric-change", fabric_id=fabric.pk, change_id=change.pk)
            posted = _table_from_form(request.POST)
            set_qos_table(actor, principal, fabric, posted)
        except ConsoleError as exc:
            errors = list((exc.fields or {}).get("classes") or []) or [exc.detail]
        else:
            messages.success(request, "QoS table saved. Preview or push the change to put it on the fabric.")
            return redirect("web:fabric-qos", fabric_id=fabric.pk)
    view = qos_view(fabric)
    table = posted or view["table"]
    rows = [{"name": name, **table["classes"].get(name, {})} for name in CLASSES]
    context = {
        "fabric": fabric,
        "view": view,
        "table": table,
        "rows": rows,
        "errors": errors,
        "can_edit": principal.role == Role.OPERATOR and principal.can_write,
        "active": "fabrics",
    }
    return render(request, "web/fabric_qos.html", context, status=400 if errors else 200)
