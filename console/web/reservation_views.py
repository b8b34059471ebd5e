"""Reservation pages: tenant self-service, one reservation, and the operator's views.

Thin: the self-service and detail pages carry their initial data as ``json_script`` and talk to
the scheduling REST API (/api/pools/, /api/quotas/, /api/reservations/); the operator pages read
through ``scheduling.read_models`` and write quotas through ``quotas.set_quota``. Tenant
users see their own tenant's rows only (``visible_to``): another tenant's reservation is 404,
and the operator pages do not exist for them (404) either.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any

import django_tables2 as tables
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet, Sum
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from console.fabric.filtersets import carrying_change
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.models import Principal, Role, Tenant
from console.web.constraint_form import constraint_controls
from console.web.context import principal_for
from console.web.tables import respond, table_context
from console.web.tables.quotas import QuotaPageFilter, QuotaTable, quota_row
from console.web.tables.reservations import ReservationPageFilter, ReservationTable
from scheduling import read_models
from scheduling.api.serializers import ReservationSerializer
from scheduling.models import Pool, PriorityClass, Quota, Reservation
from scheduling.services import quotas
from scheduling.services.timeline import timeline

#: Who reserves: tenant users for their tenant, operators for any tenant.
RESERVERS = {Role.OPERATOR, Role.TENANT_ADMIN, Role.TENANT_MEMBER}
#: Who reads the reservation pages: everyone who reserves, and auditors (read-only, every tenant).
READERS = RESERVERS | {Role.AUDITOR}
#: Who reads the operator's views (all reservations, quotas, occupancy); only operators write.
OPERATORS = {Role.OPERATOR, Role.AUDITOR}
POLL_MS = 2000
#: The size buttons of the form (GPUs): one click each.
SIZE_PRESETS = (8, 16, 32, 64)


def _principal(request: HttpRequest, roles: Set[str]) -> Principal:
    """The principal, or 404 for roles the page does not exist for; 403 for a write by a reader."""
    principal = principal_for(request)
    if principal.role not in roles:
        raise Http404
    if request.method not in ("GET", "HEAD", "OPTIONS") and not principal.can_write:
        raise PermissionDenied("auditors have read-only access")
    return principal


def _tabs(principal: Principal) -> list[dict[str, str]]:
    tabs = [{"key": "reserve", "label": "Reserve", "url": reverse("web:reservations")}]
    if principal.role not in OPERATORS:
        tabs.append({"key": "list", "label": "List and export", "url": reverse("web:reservations-list")})
    if principal.role in OPERATORS:
        tabs += [
            {"key": "all", "label": "All reservations", "url": reverse("web:reservations-all")},
            {"key": "quotas", "label": "Quotas", "url": reverse("web:reservation-quotas")},
            {"key": "occupancy", "label": "Occupancy", "url": reverse("web:reservation-occupancy")},
            {"key": "power", "label": "Power policy", "url": reverse("web:power-policy")},
        ]
    return tabs


def _page(request: HttpRequest, template: str, principal: Principal, tab: str, **context: Any) -> HttpResponse:
    context.update(active="reservations", tabs=_tabs(principal), tab=tab)
    return render(request, template, context)


def _visible_reservation(principal: Principal, pk: int) -> Reservation:
    reservation = (Reservation.objects.visible_to(principal).select_related("pool", "tenant").filter(pk=pk)).first()
    if reservation is None:
        raise Http404  # another tenant's reservation does not exist for this user
    return reservation


def _urls() -> dict[str, str]:
    """URL templates the script fills with a reservation id (``0`` is the placeholder)."""
    return {
        "detail": reverse("web:reservation", args=[0]),
        "connection": reverse("web:reservation-connection", args=[0]),
        "use": reverse("web:reservation-use", args=[0]),
        "api": "/api/",
    }


@login_required
def reservations(request: HttpRequest) -> HttpResponse:
    """Self-service: quota and usage, availability timelines, the form with live preview, and
    the reservations of the tenant (all of them for operators)."""
    principal = _principal(request, READERS)
    tenant = Tenant.objects.filter(pk=principal.tenant_id).first() if principal.tenant_id is not None else None
    tenants = (
        [{"id": t.pk, "name": t.name} for t in Tenant.objects.order_by("name")] if principal.sees_all_tenants else []
    )
    init = {
        "page": "reserve",
        "role": principal.role,
        "user_id": principal.user_id,
        "can_write": principal.can_write,
        # the tenant column and tenant names: whoever sees every tenant (operators and auditors)
        "is_operator": principal.sees_all_tenants,
        "tenant": {"id": tenant.pk, "name": tenant.name} if tenant else None,
        "tenants": tenants,
        "pools": read_models.pool_summaries(),
        "near": read_models.near_choices(tenant),
        "default_pool": _default_pool(tenant),
        "priority_classes": list(PriorityClass.values),
        "urls": _urls(),
        "poll_ms": POLL_MS,
    }
    # Finished reservations: a compact table (sortable, paginated), not a card each.
    finished = Reservation.objects.visible_to(principal).filter(status__in=Reservation.FINISHED)
    finished_table = ReservationTable(
        finished.select_related("tenant", "pool"),
        exclude=("partition_name", "nodes", "pkey", "sl", *(() if principal.sees_all_tenants else ("tenant",))),
        attrs={"class": "grid sortable compact", "data-testid": "finished-reservations"},
        empty_text="None yet.",
    )
    tables.RequestConfig(request, paginate={"per_page": 10}).configure(finished_table)
    return _page(
        request,
        "web/reservations.html",
        principal,
        "reserve",
        init=init,
        tenant=tenant,
        finished_table=finished_table,
        constraints=constraint_controls(),
        size_presets=SIZE_PRESETS,
        name_hint=f"{tenant.slug if tenant else 'tenant'}-8g-1a2b",
    )


def _default_pool(tenant: Tenant | None) -> int | None:
    """The pool the form starts with: the tenant's (its largest guarantee), else none chosen."""
    if tenant is None:
        return None
    quotas_of = Quota.objects.filter(tenant=tenant).order_by("-guaranteed_gpus", "pool__name")
    return quotas_of.values_list("pool_id", flat=True).first()


@login_required
def reservation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One reservation: status (live until ready), window, nodes, GPUs, partition, connection."""
    principal = _principal(request, READERS)
    reservation = _visible_reservation(principal, pk)
    init = {
        "page": "detail",
        "role": principal.role,
        "user_id": principal.user_id,
        "can_write": principal.can_write,
        # the tenant column and tenant names: whoever sees every tenant (operators and auditors)
        "is_operator": principal.sees_all_tenants,
        "reservation": ReservationSerializer(reservation).data,
        "connection": read_models.connection_details(reservation),
        "tenant_name": reservation.tenant.name,
        "pool_name": reservation.pool.name,
        "urls": _urls(),
        "poll_ms": POLL_MS,
    }
    # Operators (and auditors) see the change request that carried the partition onto the fabric;
    # everyone sees when it was pushed and verified, in the history.
    carrying = carrying_change(reservation.fabric_id, reservation.partition_name)
    return _page(
        request,
        "web/reservations_detail.html",
        principal,
        "reserve",
        init=init,
        reservation=reservation,
        steps=timeline(reservation, carrying),
        carrying=carrying if principal.sees_all_tenants else None,
        show_changes=principal.sees_all_tenants,
    )


@login_required
def reservation_connection(request: HttpRequest, pk: int) -> JsonResponse:
    """Connection details of a visible reservation: nodes, GPUs and HCA port GUIDs."""
    principal = _principal(request, READERS)
    reservation = _visible_reservation(principal, pk)
    return JsonResponse({"id": reservation.pk, "nodes": read_models.connection_details(reservation)})


@login_required
def reservations_all(request: HttpRequest) -> HttpResponse:
    """Operators: every tenant's reservations, sorted, filtered, paginated, exported as CSV."""
    return _reservation_list(request, _principal(request, OPERATORS), "all", "reservations-all")


@login_required
def reservations_list(request: HttpRequest) -> HttpResponse:
    """Whoever reads reservations: the visible ones (a tenant's own) as a sortable, exportable table."""
    principal = _principal(request, READERS)
    name = "reservations-all" if principal.sees_all_tenants else f"reservations-{_tenant_slug(principal)}"
    return _reservation_list(request, principal, "list", name)


def _tenant_slug(principal: Principal) -> str:
    slug = Tenant.objects.filter(pk=principal.tenant_id or 0).values_list("slug", flat=True).first()
    return slug or "tenant"


def _reservation_list(request: HttpRequest, principal: Principal, tab: str, export_name: str) -> HttpResponse:
    rows: QuerySet[Reservation] = Reservation.objects.visible_to(principal).select_related("tenant", "pool")
    filterset = ReservationPageFilter(request.GET, queryset=rows, principal=principal)
    rows = filterset.qs if filterset.is_valid() else rows.none()
    table = ReservationTable(rows, exclude=() if principal.sees_all_tenants else ("tenant",))
    return respond(request, table, export_name) or _page(
        request, "web/reservations_all.html", principal, tab, **table_context(request, table, filterset)
    )


class QuotaForm(forms.Form):
    tenant = forms.ModelChoiceField(Tenant.objects.all())
    pool = forms.ModelChoiceField(Pool.objects.all())
    guaranteed_gpus = forms.IntegerField(min_value=0, max_value=1_000_000)
    borrow_limit_gpus = forms.IntegerField(min_value=0, max_value=1_000_000, initial=0)
    guaranteed_leaf_groups = forms.IntegerField(min_value=0, max_value=10_000, required=False)
    classes = forms.MultipleChoiceField(choices=PriorityClass.choices, required=False)  # none ticked: as they are
    high_priority_gpus = forms.IntegerField(min_value=0, max_value=1_000_000, required=False)


@login_required
def reservation_quotas(request: HttpRequest) -> HttpResponse:
    """Operators: guaranteed and borrowable GPUs of every tenant in every pool, with usage.
    POST sets one tenant's quota in one pool (through the quota service)."""
    principal = _principal(request, OPERATORS)
    if request.method == "POST":
        form = QuotaForm(request.POST)
        if not form.is_valid():
            messages.error(request, "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in form.errors.items()))
        else:
            data = form.cleaned_data
            try:
                quota = quotas.set_quota(
                    Actor.for_user(request.user),
                    principal,
                    tenant=data["tenant"],
                    pool=data["pool"],
                    guaranteed_gpus=data["guaranteed_gpus"],
                    borrow_limit_gpus=data["borrow_limit_gpus"],
                    guaranteed_leaf_groups=data["guaranteed_leaf_groups"] or None,
                    classes=data["classes"] or None,
                    high_priority_gpus=data["high_priority_gpus"],
                )
            except ConsoleError as exc:
                messages.error(request, exc.detail)
            else:
                messages.success(
                    request,
                    f"Quota of {data['tenant'].name} in {data['pool'].name}: "
                    f"{quota.guaranteed_gpus} guaranteed + {quota.borrow_limit_gpus} borrowable; "
                    f"classes {', '.join(quota.classes)}.",
                )
        return redirect("web:reservation-quotas")
    # A fixed number of queries whatever the pools × tenants grid holds (tests/platform/test_query_counts.py).
    filterset = QuotaPageFilter(request.GET)
    pools_qs, tenants_qs = filterset.narrow(Pool.objects.order_by("name"), Tenant.objects.order_by("name"))
    existing = {(q.tenant_id, q.pool_id): q for q in Quota.objects.visible_to(principal)}
    usages = quotas.quota_usages(existing.values())
    pools = list(pools_qs.annotate(capacity_gpus=Sum("nodes__gpus")))
    rows = [
        quota_row(pool, tenant, existing.get((tenant.pk, pool.pk)), usages) for pool in pools for tenant in tenants_qs
    ]
    table = QuotaTable(rows, can_write=principal.can_write)
    if (csv := respond(request, table, "quotas")) is not None:
        return csv
    context = table_context(request, table, filterset, testid="quota", note="figures in GPUs")
    return _page(request, "web/reservations_quotas.html", principal, "quotas", **context)


@login_required
def reservation_occupancy(request: HttpRequest) -> HttpResponse:
    """Operators: the pool's leaf groups as a grid of nodes coloured by the tenant using them."""
    principal = _principal(request, OPERATORS)
    pools = list(Pool.objects.select_related("fabric").order_by("name"))
    selected = None
    wanted = request.GET.get("pool", "")
    if wanted.isdigit():
        selected = next((p for p in pools if p.pk == int(wanted)), None)
        if selected is None:
            raise Http404
    elif pools:
        selected = pools[0]
    occupancy = read_models.occupancy(selected) if selected else None
    return _page(
        request,
        "web/reservations_occupancy.html",
        principal,
        "occupancy",
        pools=pools,
        selected=selected,
        occupancy=occupancy,
    )
