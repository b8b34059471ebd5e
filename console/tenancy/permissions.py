"""The default API permission: authenticated, with a role, and writes only where allowed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rest_framework import permissions

from console.tenancy.errors import Forbidden
from console.tenancy.models import ApiToken, Principal

if TYPE_CHECKING:  # DRF's views import the default permission class (this module) at import
    from rest_framework.request import Request
    from rest_framework.views import APIView


def require_operator(principal: Principal, *, to: str = "can do this") -> None:
    """Refuse anyone but a writing operator: :class:`Forbidden` says "only operators <to>".

    The one role check every service that only operators may call (designs, fabrics, inventory,
    tenants) makes before it changes anything.
    """
    if not (principal.is_operator and principal.can_write):
        raise Forbidden(f"only operators {to}")


def principal_of(request: Request) -> Principal:
    """The request's principal, computed once per request."""
    cached = getattr(request, "_console_principal", None)
    if cached is None:
        token = request.auth if isinstance(request.auth, ApiToken) else None
        cached = Principal.of(request.user, token)
        request._console_principal = cached  # type: ignore[attr-defined]  # a per-request cache slot
    return cached


class ConsolePermission(permissions.BasePermission):
    """Reads need a role; writes need a writing role and a token without the read-only scope.

    A viewset may narrow writes further with ``write_roles``.
    """

    message = "you do not have permission to do this"

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        principal = principal_of(request)
        if principal.role is None:
            self.message = "your account has no role in this console"
            return False
        # safe_post: a POST that computes without changing anything (e.g. a design preview).
        if request.method in permissions.SAFE_METHODS or getattr(view, "safe_post", False):
            read_roles = getattr(view, "read_roles", None)
            return read_roles is None or principal.role in read_roles
        if principal.read_only:
            self.message = "this token is read-only" if isinstance(request.auth, ApiToken) else "read-only role"
            return False
        if not principal.can_write:
            self.message = "auditors have read-only access"
            return False
        # On detail routes the role check waits for the object: another tenant's object must
        # answer 404 (it does not exist for you), not 403 (it exists but is not yours).
        if _is_detail(view):
            return True
        return self._role_allows(principal, view)

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return True
        return self._role_allows(principal_of(request), view)

    def _role_allows(self, principal: Principal, view: APIView) -> bool:
        write_roles = getattr(view, "write_roles", None)
        if write_roles is not None and principal.role not in write_roles:
            self.message = f"this needs one of the roles: {', '.join(sorted(write_roles))}"
            return False
        return True


def _is_detail(view: APIView) -> bool:
    kwargs = getattr(view, "kwargs", {}) or {}
    lookup = getattr(view, "lookup_url_kwarg", None) or getattr(view, "lookup_field", "pk")
    return lookup in kwargs
