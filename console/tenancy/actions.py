"""Every tenancy mutation, one function each: permission check, change and audit row together.

Reached from the API, the browser pages, the CLI and tasks alike.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from axes.utils import reset as axes_reset
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from console.broadcast import close_other_session_sockets, close_token_sockets, close_user_sockets
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Forbidden, Invalid
from console.tenancy.models import (
    TENANT_ROLES,
    ApiToken,
    Membership,
    Principal,
    Role,
    Tenant,
    hash_token_secret,
)
from console.tenancy.permissions import require_operator

if TYPE_CHECKING:
    from django.contrib.auth.models import User as AuthUser  # the AUTH_USER_MODEL

User = get_user_model()
MAX_TOKEN_DAYS = 366


def _require_writer(principal: Principal) -> None:
    if not principal.can_write:
        raise Forbidden("read-only access: this action changes data")


def create_tenant(actor: Actor, principal: Principal, *, name: str, slug: str = "", description: str = "") -> Tenant:
    """Create a tenant (operators only)."""
    require_operator(principal)
    slug = slug or slugify(name)[:50]
    if not slug:
        raise Invalid("a tenant needs a name with letters or digits", fields={"name": ["required"]})
    try:
        with transaction.atomic():
            tenant = Tenant.objects.create(name=name, slug=slug, description=description)
            audit.record(actor, "tenant.create", tenant, after=audit.snapshot(tenant))
    except IntegrityError as exc:
        raise Conflict(f"a tenant named {name!r} or slugged {slug!r} exists") from exc
    return tenant


def update_tenant(actor: Actor, principal: Principal, tenant: Tenant, **changes: object) -> Tenant:
    """Rename, describe, activate or deactivate a tenant (operators only)."""
    require_operator(principal)
    allowed = {"name", "slug", "description", "is_active"}
    try:
        with transaction.atomic():
            tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
            before = audit.snapshot(tenant)
            for key, value in changes.items():
                if key in allowed:
                    setattr(tenant, key, value)
            tenant.save()
            audit.record(actor, "tenant.update", tenant, before=before, after=audit.snapshot(tenant))
    except IntegrityError as exc:
        raise Conflict("another tenant has that name or slug") from exc
    return tenant


def delete_tenant(actor: Actor, principal: Principal, tenant: Tenant) -> None:
    """Delete a tenant that owns nothing any more (operators only)."""
    require_operator(principal)
    if Membership.objects.filter(tenant=tenant).exists():
        raise Conflict(f"tenant {tenant.name!r} still has members; remove them first")
    with transaction.atomic():
        before = audit.snapshot(tenant)
        audit.record(actor, "tenant.delete", tenant, before=before)
        try:
            with transaction.atomic():
                tenant.delete()
        except IntegrityError as exc:
            raise Conflict(f"tenant {tenant.name!r} still owns objects") from exc


def _check_member_role(principal: Principal, role: str, tenant: Tenant | None) -> None:
    if principal.is_operator:
        return
    if principal.role != Role.TENANT_ADMIN or not principal.can_write:
        raise Forbidden("only operators and tenant admins manage members")
    if role not in TENANT_ROLES or tenant is None or tenant.pk != principal.tenant_id:
        raise Forbidden("tenant admins manage their own tenant's members and tenant roles only")


def create_member(
    actor: Actor,
    principal: Principal,
    *,
    username: str,
    role: str,
    tenant: Tenant | None,
    email: str = "",
    password: str | None = None,
) -> Membership:
    """Create a user with a role (in a tenant for tenant roles)."""
    if role not in Role.values:
        raise Invalid(f"unknown role {role!r}", fields={"role": [f"one of {Role.values}"]})
    if not principal.is_operator:
        tenant = Tenant.objects.get(pk=principal.own_tenant_id())  # tenant admins: own tenant only
    _check_member_role(principal, role, tenant)
    if role in TENANT_ROLES and tenant is None:
        raise Invalid("tenant roles need a tenant", fields={"tenant": ["required"]})
    if role not in TENANT_ROLES:
        tenant = None
    if password is not None:
        check_password_strength(password, username=username, email=email)
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username, email=email, password=password)
            membership = Membership.objects.create(user=user, tenant=tenant, role=role)
            audit.record(actor, "member.create", membership, after=audit.snapshot(membership))
    except IntegrityError as exc:
        raise Conflict(f"user {username!r} exists") from exc
    return membership


def check_password_strength(password: str, *, username: str, email: str = "") -> None:
    """Django's password validators (AUTH_PASSWORD_VALIDATORS), as a refusal with the reasons."""
    try:
        validate_password(password, user=User(username=username, email=email))
    except DjangoValidationError as exc:
        raise Invalid(f"password: {' '.join(exc.messages)}", fields={"password": list(exc.messages)}) from exc


def change_password(
    actor: Actor, principal: Principal, user: AuthUser, *, new_password: str, keep_session_key: str | None = None
) -> None:
    """Set a user's own new password (checked against the validators); audited without the secret.
    The user's other browser sessions are signed out by it (Django's session hash), and their open
    sockets close at once (``access.ended``, 4401): only ``keep_session_key``'s (the browser that
    changed it) stay. API tokens are separate credentials and stay valid (revoke them on their own)."""
    if principal.user_id != user.pk:
        raise Forbidden("you can change your own password only")
    check_password_strength(new_password, username=user.get_username(), email=user.email)
    with transaction.atomic():
        user.set_password(new_password)
        user.save(update_fields=["password"])
        membership = Membership.objects.filter(user_id=user.pk).first()
        audit.record(
            actor,
            "member.password_change",
            membership,
            object_type=None if membership is not None else "auth.user",
            object_id=None if membership is not None else user.pk,
            object_repr=user.get_username(),
        )
        transaction.on_commit(lambda: close_other_session_sockets(user.pk, keep_session_key))


def update_member(actor: Actor, principal: Principal, membership: Membership, *, role: str) -> Membership:
    """Change a member's role."""
    if role not in Role.values:
        raise Invalid(f"unknown role {role!r}", fields={"role": [f"one of {Role.values}"]})
    _check_member_role(principal, role, membership.tenant)
    with transaction.atomic():
        membership = Membership.objects.select_for_update().get(pk=membership.pk)
        before = audit.snapshot(membership)
        membership.role = role
        if role not in TENANT_ROLES:
            membership.tenant = None
        elif membership.tenant_id is None:
            raise Invalid("a global member cannot take a tenant role without a tenant")
        membership.save()
        audit.record(actor, "member.update", membership, before=before, after=audit.snapshot(membership))
        if (before["role"], before["tenant_id"]) != (membership.role, membership.tenant_id):
            # Open sockets were authorised for the old role or tenant: make them reconnect.
            user_id = membership.user_id
            transaction.on_commit(lambda: close_user_sockets(user_id))
    return membership


def remove_member(actor: Actor, principal: Principal, membership: Membership) -> None:
    """Deactivate a member's user and revoke their tokens; the audit trail keeps the name."""
    _check_member_role(principal, membership.role, membership.tenant)
    if membership.user_id == principal.user_id:
        raise Conflict("you cannot remove yourself")
    with transaction.atomic():
        before = audit.snapshot(membership)
        User.objects.filter(pk=membership.user_id).update(is_active=False)
        ApiToken.objects.filter(user_id=membership.user_id, revoked_at__isnull=True).update(revoked_at=timezone.now())
        audit.record(actor, "member.remove", membership, before=before)
        user_id = membership.user_id
        membership.delete()
        transaction.on_commit(lambda: close_user_sockets(user_id))


def issue_token(
    actor: Actor,
    principal: Principal,
    *,
    user: AuthUser,
    name: str,
    expires_in_days: int | None = None,
    read_only: bool = False,
) -> tuple[ApiToken, str]:
    """Create an API token for ``user``; returns the row and the plaintext, shown once."""
    if principal.user_id != user.pk:
        raise Forbidden("tokens are issued to yourself")
    if principal.role is None:
        raise Forbidden("you have no role in this console")
    if principal.read_only:
        raise Forbidden("a read-only token cannot create tokens")
    days = expires_in_days if expires_in_days is not None else None
    if days is not None and not (1 <= days <= MAX_TOKEN_DAYS):
        raise Invalid(
            f"expires_in_days must be between 1 and {MAX_TOKEN_DAYS}",
            fields={"expires_in_days": [f"1..{MAX_TOKEN_DAYS}"]},
        )
    # Auditors may hold tokens, but only read-only ones.
    read_only = read_only or principal.role == Role.AUDITOR
    prefix, secret, plaintext = ApiToken.mint()
    with transaction.atomic():
        token = ApiToken(
            user=user,
            tenant_id=principal.tenant_id,
            name=name,
            prefix=prefix,
            secret_hash=hash_token_secret(secret),
            read_only=read_only,
        )
        token.expires_at = timezone.now() + (dt.timedelta(days=days) if days is not None else token.default_expiry())
        token.save()
        audit.record(actor, "token.issue", token, after=audit.snapshot(token))
    return token, plaintext


def revoke_token(actor: Actor, principal: Principal, token: ApiToken) -> ApiToken:
    """Revoke a token now; its next request fails and its live sockets are closed."""
    own = token.user_id == principal.user_id
    admin = principal.role == Role.TENANT_ADMIN and token.tenant_id == principal.tenant_id
    if principal.read_only or not (own or admin or principal.is_operator):
        raise Forbidden("you can revoke your own tokens (tenant admins: their tenant's)")
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().get(pk=token.pk)
        if token.revoked_at is not None:
            return token
        before = audit.snapshot(token)
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit.record(actor, "token.revoke", token, before=before, after=audit.snapshot(token))
        token_id = token.pk
        transaction.on_commit(lambda: close_token_sockets(token_id))
    return token


def prune_expired_tokens(actor: Actor, *, older_than_days: int = 30) -> int:
    """Delete tokens that expired or were revoked long ago (a periodic task calls this)."""
    cutoff = timezone.now() - dt.timedelta(days=older_than_days)
    stale = list(ApiToken.objects.filter(expires_at__lt=cutoff) | ApiToken.objects.filter(revoked_at__lt=cutoff))
    with transaction.atomic():
        for token in stale:
            audit.record(actor, "token.prune", token, before=audit.snapshot(token))
        ApiToken.objects.filter(pk__in=[t.pk for t in stale]).delete()
    return len(stale)


def unlock_login(actor: Actor, principal: Principal, *, username: str = "", ip_address: str = "") -> int:
    """Lift a login lockout of a username or of a client address now (operators only); returns
    the number of failure records cleared. Audited as ``login.unlock``."""
    require_operator(principal)
    if bool(username) == bool(ip_address):
        raise Invalid("unlock either a username or a client address", fields={"username": ["one of the two"]})
    with transaction.atomic():
        cleared = axes_reset(username=username or None, ip=ip_address or None)
        membership = Membership.objects.filter(user__username=username).first() if username else None
        audit.record(
            actor,
            "login.unlock",
            object_type="login",
            object_id=(username or ip_address)[:64],
            object_repr=username or ip_address,
            after={"username": username or None, "ip_address": ip_address or None, "cleared": cleared},
            tenant_id=membership.tenant_id if membership is not None else None,
        )
    return cleared
