"""The ``/ufmRest/`` views: authenticate, pick the fabric, call :mod:`console.ufm.pkeys`, answer
in UFM's shape. Thin on purpose: every rule lives in the plain functions they call."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth import authenticate
from rest_framework import authentication, exceptions
from rest_framework.authentication import SessionAuthentication
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.fabric.models import ChangeRequest, Fabric
from console.tenancy.authentication import BearerTokenAuthentication, resolve_token
from console.tenancy.context import Actor
from console.tenancy.models import TOKEN_PREFIX, ApiToken, Principal
from console.tenancy.permissions import principal_of
from console.tenancy.throttling import check_anonymous
from console.ufm import inventory, pkeys
from console.ufm.wire import (
    UfmError,
    parse_bool,
    parse_guids,
    parse_guids_request,
    parse_pkey,
    query_flag,
    ufm_pkey,
)

#: What ``GET app/ufm_version`` reports: the UFM API generation these shapes follow, and who serves it.
VERSION = {"ufm_release_version": "6.12.0 (ib-console UFM-compatible P_Key API)"}


class BasicAuthentication(authentication.BasicAuthentication):
    """HTTP Basic with console users, through Django's backends (django-axes counts failures).
    The password may be one of the user's API tokens (``ibc_…``): UFM clients such as
    ib-kubernetes speak Basic only, and a cluster's Secret should hold a token its owner can
    revoke (read-only ones stay read-only), never a personal password."""

    www_authenticate_realm = "ufmRest"

    def authenticate_credentials(self, userid: str, password: str, request: Request | None = None) -> Any:
        if password.startswith(f"{TOKEN_PREFIX}_"):
            try:
                token = resolve_token(password)
            except exceptions.AuthenticationFailed:
                token = None
            if token is None or token.user.get_username() != userid:
                if request is not None:
                    check_anonymous(request._request)  # guessing tokens is throttled as elsewhere
                raise exceptions.AuthenticationFailed("invalid username or API token")
            return (token.user, token)
        user = authenticate(request._request if request is not None else None, username=userid, password=password)
        if user is None or not user.is_active:
            raise exceptions.AuthenticationFailed("invalid username or password")
        return (user, None)


class JsonOnly(DefaultContentNegotiation):
    """UFM answers JSON whatever the ``Accept`` header says (a browser included)."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))
        return first, first.media_type


#: Methods that change something: JSON bodies only, and never from another site.
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def cross_site(request: Request) -> str | None:
    """Why a browser sent ``request`` from another site (None: it did not, or it is no browser).

    A browser holding an operator's Basic credentials sends them with a form another site posts
    (no CSRF token is asked of Basic auth): the Fetch metadata header says so (``cross-site``, and
    ``same-site``: a sibling host may be someone else's), else the ``Origin`` does when it is not
    the console's own (scheme and host as the request reached it) nor one of
    ``CONSOLE_ALLOWED_ORIGINS``. Clients that are not browsers send neither."""
    site = request.headers.get("Sec-Fetch-Site", "").strip().lower()
    if site in ("cross-site", "same-site"):
        return f"Sec-Fetch-Site: {site}"
    origin = request.headers.get("Origin")
    if origin is None:
        return None
    own = f"{request.scheme}://{request.get_host()}".lower()
    allowed = {own, *(o.strip().rstrip("/").lower() for o in settings.CONSOLE_ALLOWED_ORIGINS)}
    return None if origin.strip().rstrip("/").lower() in allowed else f"Origin: {origin[:100]}"


def json_body(request: Request) -> bool:
    """Whether the body (if any) is declared JSON: ``application/json`` or ``…+json``."""
    declared = request.content_type.split(";", 1)[0].strip().lower()
    has_body = int(request.META.get("CONTENT_LENGTH") or 0) > 0 or "HTTP_TRANSFER_ENCODING" in request.META
    if not declared:
        return not has_body
    return declared == "application/json" or declared.endswith("+json")


class UfmView(APIView):
    """Base: console users by Basic or bearer token (or a browser's session, CSRF-checked); any
    role reads; answers JSON; errors as ``{"error": …}``. A write takes a JSON body only (415
    otherwise: a form or multipart post is what another site's page can send without asking) and
    is refused (403) when a browser says it comes from another site (:func:`cross_site`)."""

    authentication_classes = [BasicAuthentication, BearerTokenAuthentication, SessionAuthentication]
    permission_classes: list[Any] = []
    parser_classes = [JSONParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = JsonOnly
    schema = None  # not part of the console's own OpenAPI document (docs/api.md describes it)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        if request.method in UNSAFE:
            why = cross_site(request)
            if why is not None:
                raise UfmError(403, f"cross-site requests are refused ({why})")
            if not json_body(request):
                raise UfmError(415, f"send JSON (Content-Type: application/json), not {request.content_type!r}")
        super().initial(request, *args, **kwargs)

    def principal(self, request: Request) -> Principal:
        if not (request.user and request.user.is_authenticated):
            raise exceptions.NotAuthenticated("authentication credentials were not provided")
        principal = principal_of(request)
        if principal.role is None:
            raise UfmError(403, "your account has no role in this console")
        return principal

    def writer(self, request: Request) -> tuple[Actor, Principal]:
        principal = self.principal(request)
        if principal.read_only:
            raise UfmError(403, "this token is read-only")
        token = request.auth if isinstance(request.auth, ApiToken) else None
        return Actor.for_user(request.user, token), principal

    def fabric(self, **kwargs: Any) -> Fabric:
        name = kwargs.get("fabric") or settings.UFM_API_FABRIC
        if name:
            fabric = Fabric.objects.filter(name=name).first()
            if fabric is None:
                raise UfmError(404, f"no fabric {name!r}")
            return fabric
        fabrics = list(Fabric.objects.all()[:2])
        if len(fabrics) != 1:
            raise UfmError(404, "several fabrics: use /ufm/<fabric>/ufmRest/ or set CONSOLE_UFM_FABRIC")
        return fabrics[0]

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, UfmError):
            response = Response(exc.body(), status=exc.status)
            if exc.retry_after is not None:
                response["Retry-After"] = str(exc.retry_after)
            return response
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            response = Response({"error": str(exc.detail)}, status=401)
            response["WWW-Authenticate"] = 'Basic realm="ufmRest"'
            return response
        if isinstance(exc, exceptions.APIException):
            response = Response({"error": str(exc.detail)}, status=exc.status_code)
            wait = getattr(exc, "wait", None)
            if isinstance(exc, exceptions.Throttled) and wait is not None:
                response["Retry-After"] = str(int(wait) + 1)
            return response
        return super().handle_exception(exc)


def done(change: ChangeRequest | None) -> Response:
    """UFM answers a verified change with 200 and an empty object; a change held for an operator's
    approval (fabrics with approval required) is accepted, not done: 202 with the change's id."""
    if change is not None and change.status == ChangeRequest.Status.PENDING_APPROVAL:
        return Response({"change_id": change.pk, "status": change.status}, status=202)
    return Response({}, status=200)


class VersionView(UfmView):
    def get(self, request: Request, **kwargs: Any) -> Response:
        self.principal(request)
        return Response(VERSION)


class PkeysView(UfmView):
    def get(self, request: Request, **kwargs: Any) -> Response:
        views = pkeys.visible_pkeys(self.principal(request), self.fabric(**kwargs))
        guids_data = query_flag(request.query_params.get("guids_data"))
        return Response({ufm_pkey(k): views[k].body(guids_data=guids_data) for k in sorted(views)})

    def post(self, request: Request, **kwargs: Any) -> Response:
        actor, principal = self.writer(request)
        return done(pkeys.add_guids(actor, principal, self.fabric(**kwargs), parse_guids_request(request.data)))

    def put(self, request: Request, **kwargs: Any) -> Response:
        actor, principal = self.writer(request)
        return done(pkeys.set_guids(actor, principal, self.fabric(**kwargs), parse_guids_request(request.data)))


class CreatePkeyView(UfmView):
    def post(self, request: Request, **kwargs: Any) -> Response:
        actor, principal = self.writer(request)
        body = request.data if isinstance(request.data, dict) else {}
        name = body.get("partition_name") or ""
        if not isinstance(name, str):
            raise UfmError(400, "partition_name must be a string")
        pkey, ipoib = parse_pkey(body.get("pkey")), parse_bool(body, "ip_over_ib", True)
        return done(pkeys.create_pkey(actor, principal, self.fabric(**kwargs), pkey, name=name, ip_over_ib=ipoib))


class PkeyView(UfmView):
    def get(self, request: Request, pkey: str, **kwargs: Any) -> Response:
        view = pkeys.get_pkey(self.principal(request), self.fabric(**kwargs), parse_pkey(pkey))
        return Response(view.body(guids_data=query_flag(request.query_params.get("guids_data"))))

    def delete(self, request: Request, pkey: str, **kwargs: Any) -> Response:
        actor, principal = self.writer(request)
        return done(pkeys.delete_pkey(actor, principal, self.fabric(**kwargs), parse_pkey(pkey)))


class PkeyGuidsView(UfmView):
    def delete(self, request: Request, pkey: str, guids: str, **kwargs: Any) -> Response:
        actor, principal = self.writer(request)
        fabric = self.fabric(**kwargs)
        return done(pkeys.remove_guids(actor, principal, fabric, parse_pkey(pkey), parse_guids(guids)))


class RemoveGuidsView(UfmView):
    def post(self, request: Request, **kwargs: Any) -> Response:
        actor, principal = self.writer(request)
        body = request.data if isinstance(request.data, dict) else {}
        pkey, guids = parse_pkey(body.get("pkey")), parse_guids(body.get("guids"))
        return done(pkeys.remove_guids(actor, principal, self.fabric(**kwargs), pkey, guids))


class SystemsView(UfmView):
    def get(self, request: Request, **kwargs: Any) -> Response:
        return Response(inventory.systems(self.principal(request), self.fabric(**kwargs)))


class PortsView(UfmView):
    def get(self, request: Request, **kwargs: Any) -> Response:
        system = request.query_params.get("system")
        return Response(inventory.ports(self.principal(request), self.fabric(**kwargs), system=system))


class NotImplementedView(UfmView):
    """Any other ``/ufmRest/`` path: UFM has it, the console's subset does not (docs/api.md)."""

    def dispatch_missing(self, request: Request, **kwargs: Any) -> Response:
        self.principal(request)
        raise UfmError(404, f"{request.method} {request.path} is not part of the console's UFM-compatible API")

    get = post = put = patch = delete = dispatch_missing
