"""Pages. Thin: scoping through ``visible_to``, mutations through the tenancy actions."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template import loader
from django.utils import timezone
from django.views.decorators.http import require_POST, require_safe

from console.fabric import sites
from console.power.energy import EnergyQuery, energy
from console.telemetry.overview import overview_for
from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.logins import cool_off, locked_logins
from console.tenancy.models import ApiToken, AuditEntry, Membership, Principal, Role, Tenant
from console.web.context import AuthenticatedHttpRequest, principal_for, refuse_readers
from console.web.tables import respond, table_context
from console.web.tables.audit import AuditPageFilter, AuditTable, in_words, names_for_words
from console.web.tables.tenants import TenantPageFilter, TenantTable, with_members


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability for load balancers."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


def _wants_json(request: HttpRequest) -> bool:
    return request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", "")


_ERRORS = {
    400: ("invalid", "Bad request", "The console could not make sense of that request."),
    403: ("permission_denied", "Forbidden", "You are not allowed to do that (or the form expired: reload and retry)."),
    404: ("not_found", "Not found", "There is no such page, or it is not yours to see."),
    500: ("server_error", "Server error", "Something broke on our side. It has been logged; try again shortly."),
}


def _error(request: HttpRequest, status: int) -> HttpResponse:
    code, title, message = _ERRORS[status]
    if _wants_json(request):
        return JsonResponse({"code": code, "detail": title.lower(), "fields": {}}, status=status)
    context = {"status": status, "title": title, "message": message}
    if status == 500:
        # No context processors, no database: the page must render whatever broke.
        return HttpResponse(loader.get_template("web/error.html").render(context), status=500)
    return render(request, "web/error.html", context, status=status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _error(request, 400)


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _error(request, 403)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    return _error(request, 403)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _error(request, 404)


def server_error(request: HttpRequest) -> HttpResponse:
    return _error(request, 500)


def login_locked_out(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict[str, Any] | None = None
) -> HttpResponse:
    """django-axes' answer to a locked-out login: the login page saying so, 429 + Retry-After; to a
    client of the JSON APIs (``/api/``, the UFM-compatible ``/ufmRest/``: HTTP Basic logins count
    too), the same in JSON, UFM's ``{"error": …}`` shape."""
    period = cool_off()
    minutes = max(1, round(period.total_seconds() / 60)) if period is not None else None
    if request.path.startswith(("/api/", "/ufm/", "/ufmRest/", "/ufmRestV2/")):
        wait = f"; try again in {minutes} minutes" if minutes is not None else ""
        message = f"too many failed logins for this user from this address{wait}"
        response: HttpResponse = JsonResponse({"error": message, "detail": message}, status=429)
    else:
        response = render(
            request, "registration/login.html", {"locked_out": True, "cooloff_minutes": minutes}, status=429
        )
    if period is not None:
        response["Retry-After"] = str(int(period.total_seconds()))
    return response


#: The dashboard's poll (frontend/src/dashboard.ts) says so: it swaps in only ``#dashboard``, so
#: the energy card (outside it) is computed once per page load, not every 3 s.
POLL_HEADER = "X-Dashboard-Poll"


def _energy_card(principal: Principal, request: HttpRequest) -> dict[str, Any] | None:
    """kWh over the last 24 hours and 7 days, drawn and always-on (operators and auditors)."""
    if not principal.sees_all_tenants or request.headers.get(POLL_HEADER):
        return None
    now = timezone.now()
    spans = (("24 h", dt.timedelta(hours=24)), ("7 days", dt.timedelta(days=7)))
    cards = []
    for label, span in spans:
        total = energy(EnergyQuery.checked(now - span, now), now=now).total
        cards.append({"label": label, "key": label.replace(" ", ""), "saved": f"{total['saved_fraction']:.1%}"} | total)
    return {"spans": cards, "at": now}


@login_required
def home(request: HttpRequest) -> HttpResponse:
    principal = principal_for(request)
    context = {
        "energy": _energy_card(principal, request),
        "overview": overview_for(principal),
        "tenant": Tenant.objects.filter(pk=principal.tenant_id).first() if principal.tenant_id is not None else None,
        "tenants": Tenant.objects.visible_to(principal).count(),
        "members": Membership.objects.visible_to(principal).count(),
        "recent_audit": _recent_changes(principal),
        "sites_unreachable": sites.unreachable() if principal.sees_all_tenants else [],
        "active": "home",
    }
    return render(request, "web/home.html", context)


def _recent_changes(principal: Principal) -> list[tuple[AuditEntry, str]]:
    """The newest audit entries this principal reads, each with its sentence."""
    if principal.role not in (Role.OPERATOR, Role.AUDITOR, Role.TENANT_ADMIN):
        return []
    entries = list(AuditEntry.objects.visible_to(principal).select_related("tenant")[:8])
    names = names_for_words(principal) if entries else {}
    return [(entry, in_words(entry, names)) for entry in entries]


def _require_role(request: HttpRequest, roles: set[str]) -> None:
    if principal_for(request).role not in roles:
        raise Http404  # pages a role cannot use do not exist for it


@login_required
@require_safe
def audit_log(request: HttpRequest) -> HttpResponse:
    """The audit log as sentences, sortable and filterable; ``?_export=csv`` answers the CSV."""
    _require_role(request, {Role.OPERATOR, Role.AUDITOR, Role.TENANT_ADMIN})
    principal = principal_for(request)
    queryset = AuditEntry.objects.visible_to(principal).select_related("tenant")
    filterset = AuditPageFilter(request.GET, queryset=queryset, principal=principal)
    entries = filterset.qs if filterset.is_valid() else queryset.none()
    hidden = () if principal.sees_all_tenants else ("tenant",)  # a tenant's log is all its own
    table = AuditTable(entries, names=names_for_words(principal), exclude=hidden)
    return respond(request, table, "audit-log") or render(
        request, "web/audit.html", {**table_context(request, table, filterset), "active": "audit"}
    )


class TenantForm(forms.Form):
    name = forms.CharField(max_length=100)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


@login_required
def tenants(request: HttpRequest) -> HttpResponse:
    _require_role(request, {Role.OPERATOR, Role.AUDITOR})
    principal = refuse_readers(request) if request.method == "POST" else principal_for(request)
    form = TenantForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            tenant = actions.create_tenant(Actor.for_user(request.user), principal, **form.cleaned_data)
        except ConsoleError as exc:
            form.add_error(None, exc.detail)
        else:
            messages.success(request, f"Tenant {tenant.name} created.")
            return redirect("web:tenants")
    rows = with_members(Tenant.objects.visible_to(principal))
    filterset = TenantPageFilter(request.GET, queryset=rows)
    table = TenantTable(filterset.qs if filterset.is_valid() else rows.none())
    if (export := respond(request, table, "tenants")) is not None:
        return export
    context = {
        **table_context(request, table, filterset),
        "form": form,
        "active": "tenants",
        "locked_logins": len(locked_logins()),
    }
    return render(request, "web/tenants.html", context)


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100)
    expires_in_days = forms.IntegerField(min_value=1, max_value=366, initial=90)
    read_only = forms.BooleanField(required=False)


@login_required
def tokens(request: AuthenticatedHttpRequest) -> HttpResponse:
    principal = principal_for(request)
    if principal.role is None:
        raise Http404
    form = TokenForm(request.POST or None)
    created = None
    if request.method == "POST" and form.is_valid():
        try:
            token, plaintext = actions.issue_token(
                Actor.for_user(request.user), principal, user=request.user, **form.cleaned_data
            )
        except ConsoleError as exc:
            form.add_error(None, exc.detail)
        else:
            created = {"token": token, "plaintext": plaintext}
            form = TokenForm()
    rows = ApiToken.objects.visible_to(principal).filter(user=request.user)
    context = {"rows": rows, "form": form, "created": created, "active": "tokens"}
    return render(request, "web/tokens.html", context)


@login_required
@require_POST
def revoke_token(request: HttpRequest, pk: int) -> HttpResponse:
    principal = principal_for(request)
    token = ApiToken.objects.visible_to(principal).filter(pk=pk, user=request.user).first()
    if token is None:
        raise Http404
    actions.revoke_token(Actor.for_user(request.user), principal, token)
    messages.success(request, f"Token {token.name} revoked.")
    return redirect("web:tokens")
