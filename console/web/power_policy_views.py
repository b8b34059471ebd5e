"""The power policy editor: one pool's policy as a form (operators), the last runs' reports and
the pinned nodes; auditors read it, tenants never see it (404). Writes go through
``console.power.policy`` (audited), like the API."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from console.power import policy
from console.power.models import PolicyRun, PowerPin
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.web.reservation_views import OPERATORS, _page, _principal
from scheduling.models import Node, Pool

RUNS = 10


class PolicyForm(forms.Form):
    """The pool's policy; each field has one plain-language help line."""

    enabled = forms.BooleanField(required=False, help_text="Apply this policy every minute.")
    dry_run = forms.BooleanField(
        required=False, label="Dry run", help_text="Only report what it would do: no node is switched."
    )
    idle_after_min = forms.IntegerField(
        min_value=0,
        max_value=43_200,
        label="Power off after idle (minutes)",
        help_text="A node unused this long may be powered off.",
    )
    buffer_nodes = forms.IntegerField(
        min_value=0, max_value=100_000, label="Warm nodes", help_text="Idle nodes always kept on for new work."
    )
    buffer_percent = forms.FloatField(
        min_value=0,
        max_value=100,
        label="Warm nodes (% of pool)",
        help_text="Or this share of the pool, whichever is more nodes.",
    )
    margin_min = forms.IntegerField(
        min_value=0,
        max_value=1_440,
        label="Margin (minutes)",
        help_text="Extra time on top of a node's boot time before a reservation starts.",
    )
    max_actions_per_minute = forms.IntegerField(
        min_value=0,
        max_value=10_000,
        label="Power actions per minute",
        help_text="At most this many nodes switched per minute (0: no limit).",
    )


class PinForm(forms.Form):
    node = forms.ModelChoiceField(queryset=Node.objects.none(), help_text="This node is never powered off.")
    reason = forms.CharField(max_length=300, required=False, help_text="Why, for the other operators.")


def _minutes(delta: dt.timedelta) -> int:
    return int(delta.total_seconds() // 60)


def _post(request: HttpRequest, pool: Pool) -> None:
    actor, what = Actor.for_user(request.user), request.POST.get("form")
    try:
        if what == "policy":
            form = PolicyForm(request.POST)
            if not form.is_valid():
                messages.error(request, "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in form.errors.items()))
                return
            data = dict(form.cleaned_data)
            data["idle_after"] = dt.timedelta(minutes=data.pop("idle_after_min"))
            data["margin"] = dt.timedelta(minutes=data.pop("margin_min"))
            policy.set_policy(pool.pk, actor=actor, data=data)
            messages.success(request, f"Power policy of {pool.name} saved.")
        elif what in ("run", "dry-run"):
            run = policy.apply(pool.pk, actor=actor, trigger="operator", dry_run=True if what == "dry-run" else None)
            messages.success(request, f"Policy run: {run.summary}.")
        elif what == "pin":
            pin_form = PinForm(request.POST)
            pin_form.fields["node"].queryset = pool.nodes.all()  # type: ignore[attr-defined]
            if not pin_form.is_valid():
                messages.error(request, "Pick a node of this pool to pin.")
                return
            node = pin_form.cleaned_data["node"]
            policy.pin(node.pk, actor=actor, reason=pin_form.cleaned_data["reason"])
            messages.success(request, f"{node.name} pinned on.")
        elif what == "unpin":
            node = (
                pool.nodes.filter(pk=request.POST.get("node", "")).first()
                if request.POST.get("node", "").isdigit()
                else None
            )
            if node is None:
                raise Http404
            policy.unpin(node.pk, actor=actor)
            messages.success(request, f"{node.name} unpinned.")
    except ConsoleError as exc:
        messages.error(request, exc.detail)


@login_required
def power_policy(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    """Operators edit a pool's power policy, run it (or a dry run) and pin nodes; auditors read."""
    principal = _principal(request, OPERATORS)
    pools = list(Pool.objects.select_related("fabric").order_by("name"))
    pool = next((p for p in pools if p.pk == pk), None) if pk is not None else (pools[0] if pools else None)
    if pk is not None and pool is None:
        raise Http404
    if request.method == "POST":
        if pool is None:
            raise Http404
        _post(request, pool)
        return redirect("web:power-policy-pool", pk=pool.pk)
    context: dict[str, Any] = {"pools": pools, "pool": pool}
    if pool is not None:
        stored = policy.policy_of(pool)
        initial = {
            "enabled": stored.enabled,
            "dry_run": stored.dry_run,
            "idle_after_min": _minutes(stored.idle_after),
            "buffer_nodes": stored.buffer_nodes,
            "buffer_percent": stored.buffer_percent,
            "margin_min": _minutes(stored.margin),
            "max_actions_per_minute": stored.max_actions_per_minute,
        }
        pin_form = PinForm()
        pin_form.fields["node"].queryset = pool.nodes.order_by("name")  # type: ignore[attr-defined]
        context.update(
            stored=stored,
            form=PolicyForm(initial=initial),
            pin_form=pin_form,
            runs=list(PolicyRun.objects.filter(pool=pool)[:RUNS]),
            pins=list(PowerPin.objects.filter(node__pools=pool).select_related("node").order_by("node__name")),
            power_counts=_power_counts(pool),
            can_write=principal.can_write,
        )
    return _page(request, "web/power_policy.html", principal, "power", **context)


def _power_counts(pool: Pool) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for state in pool.nodes.values_list("power_state", flat=True):
        counts[state] = counts.get(state, 0) + 1
    return sorted(counts.items())
