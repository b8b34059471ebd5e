"""Locked logins: the usernames and client addresses django-axes locked out, for operators (and
auditors, read-only); operators unlock them here (``actions.unlock_login``, audited). And the
signed-in user's own password change (``actions.change_password``, validated and audited)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.logins import address_throttled, cool_off, locked_logins, record_throttle
from console.tenancy.models import Role
from console.tenancy.throttling import client_address
from console.web.context import AuthenticatedHttpRequest, principal_for, refuse_readers


class LoginView(auth_views.LoginView):
    """Django's login, with the address throttle: once an address has had
    ``CONSOLE_LOGIN_ADDRESS_LIMIT`` failed logins in the cool-off, its wrong guesses are answered
    429 with Retry-After. A right password of an account that is not locked from that address
    still signs in: someone else's failures never lock a user out (django-axes locks a username
    for one address, console/settings.py)."""

    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        if settings.CONSOLE_OIDC_CLIENT_ID:  # sign in with the company's OpenID Connect provider
            context["sso_name"] = settings.CONSOLE_OIDC_NAME
            context["sso_refused"] = self.request.GET.get("sso") == "refused"
        return context

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        address = client_address(self.request)
        if not address_throttled(address):
            return super().form_invalid(form)
        record_throttle(self.request, address)
        period = cool_off()
        minutes = max(1, round(period.total_seconds() / 60)) if period is not None else None
        context = self.get_context_data(form=form, throttled=True, cooloff_minutes=minutes)
        response = self.render_to_response(context, status=429)
        if period is not None:
            response["Retry-After"] = str(int(period.total_seconds()))
        return response


@login_required
def locked(request: HttpRequest) -> HttpResponse:
    """Every username and address locked out now, with when the lock lifts by itself."""
    if principal_for(request).role not in (Role.OPERATOR, Role.AUDITOR):
        raise Http404
    period = cool_off()
    context = {
        "rows": locked_logins(),
        "cooloff_minutes": round(period.total_seconds() / 60) if period is not None else None,
        "active": "tenants",
    }
    return render(request, "web/locked_logins.html", context)


@login_required
@require_POST
def unlock(request: HttpRequest) -> HttpResponse:
    """Lift one lockout (a username or an address) now."""
    principal = principal_for(request)
    if principal.role not in (Role.OPERATOR, Role.AUDITOR):
        raise Http404
    refuse_readers(request)
    kind = request.POST.get("kind", "")
    value = request.POST.get("value", "")
    try:
        actions.unlock_login(
            Actor.for_user(request.user),
            principal,
            username=value if kind == "username" else "",
            ip_address=value if kind == "ip_address" else "",
        )
    except ConsoleError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"Unlocked {value}.")
    return redirect("web:locked-logins")


@login_required
def change_password(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The signed-in user's own password: the old one, then a new one that passes the validators."""
    form = PasswordChangeForm(request.user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            actions.change_password(
                Actor.for_user(request.user),
                principal_for(request),
                request.user,
                new_password=form.cleaned_data["new_password1"],
                keep_session_key=request.session.session_key,  # (before the hash update cycles it)
            )
        except ConsoleError as exc:
            form.add_error(None, exc.detail)
        else:
            update_session_auth_hash(request, request.user)  # this session stays signed in
            messages.success(request, "Password changed.")
            return redirect("web:home")
    return render(request, "web/password.html", {"form": form})
