"""Navigation by role, for every page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.urls import reverse

from console.tenancy.models import Principal, Role

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class AuthenticatedHttpRequest(HttpRequest):
    """The request of a ``login_required`` page, whose user is signed in (a type, never built)."""

    user: User


@dataclass(frozen=True)
class NavItem:
    label: str
    url: str
    key: str


def principal_for(request: HttpRequest) -> Principal:
    cached = getattr(request, "_console_principal", None)
    if cached is None:
        cached = Principal.of(getattr(request, "user", None))
        request._console_principal = cached  # type: ignore[attr-defined]
    return cached


def refuse_readers(request: HttpRequest) -> Principal:
    """A page's write (POST) is refused 403 to whoever may only read it (auditors, read-only)."""
    principal = principal_for(request)
    if not principal.can_write:
        raise PermissionDenied("auditors have read-only access")
    return principal


def nav_items(principal: Principal) -> list[NavItem]:
    items = [NavItem("Overview", reverse("web:home"), "home")]
    if principal.role in (Role.OPERATOR, Role.AUDITOR):
        items.append(NavItem("Designer", reverse("web:designer"), "designer"))
        items.append(NavItem("Fabrics", reverse("web:fabrics"), "fabrics"))
        items.append(NavItem("Sites", reverse("web:sites"), "sites"))
    if principal.role is not None:
        items.append(NavItem("Live", reverse("web:live"), "live"))
    if principal.role in (Role.OPERATOR, Role.AUDITOR):
        items.append(NavItem("Tenants", reverse("web:tenants"), "tenants"))
    if principal.role in (Role.OPERATOR, Role.AUDITOR, Role.TENANT_ADMIN, Role.TENANT_MEMBER):
        items.append(NavItem("Reservations", reverse("web:reservations"), "reservations"))
        if principal.role in (Role.TENANT_ADMIN, Role.TENANT_MEMBER):
            # Operators and auditors reach every tenant's datasets from the Sites page (their bar is full).
            items.append(NavItem("Datasets", reverse("web:datasets"), "datasets"))
        items.append(NavItem("Usage", reverse("web:usage"), "usage"))
    if principal.role in (Role.OPERATOR, Role.AUDITOR, Role.TENANT_ADMIN):
        items.append(NavItem("Audit log", reverse("web:audit"), "audit"))
    if principal.role is not None:
        items.append(NavItem("Notifications", reverse("web:notifications"), "notifications"))
        items.append(NavItem("API tokens", reverse("web:tokens"), "tokens"))
        items.append(NavItem("API docs", reverse("docs"), "api-docs"))
    return items


def navigation(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"nav_items": [], "principal": None}
    principal = principal_for(request)
    return {"nav_items": nav_items(principal), "principal": principal}
