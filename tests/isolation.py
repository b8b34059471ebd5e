"""The reusable tenant-isolation suite.

Subclass it once per tenant-scoped viewset (``class TestFooIsolation(IsolationSuite)``) and declare
the data; it then proves, for list, retrieve, update, partial update, delete, every custom action
and filters, that tenant A can neither see nor change tenant B's objects (404, never 403 or 200),
and that mass-assigned ``tenant``/``status``/``owner`` fields never move an object to another
tenant. ``tests/platform/test_isolation_coverage.py`` fails when a viewset has no such subclass.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from console.tenancy.models import Role, Tenant

COVERED_VIEWSETS: set[type] = set()


class IsolationSuite:
    viewset: ClassVar[type]
    basename: ClassVar[str]
    tenant_role: ClassVar[str] = Role.TENANT_ADMIN
    # (method, url_name suffix) of detail custom actions, e.g. ("post", "revoke")
    custom_actions: ClassVar[list[tuple[str, str]]] = []
    filter_fields: ClassVar[list[str]] = ["tenant"]
    supports_create: ClassVar[bool] = True
    supports_update: ClassVar[bool] = True
    supports_delete: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        COVERED_VIEWSETS.add(cls.viewset)

    # --- to declare ---------------------------------------------------------------------------
    def make_object(self, tenant: Tenant, user) -> Any:
        raise NotImplementedError

    def create_payload(self, other_tenant: Tenant) -> dict[str, Any]:
        """A valid creation payload that also tries to mass-assign ownership to ``other_tenant``."""
        return {"tenant": other_tenant.pk, "status": "ready", "owner": 1}

    def update_payload(self) -> dict[str, Any]:
        return {"name": "renamed"}

    def objects_of(self, tenant: Tenant):
        """Rows of this viewset's model owned by ``tenant``."""
        model = self.viewset.queryset.model
        lookup = getattr(model, "tenant_lookup", "tenant")
        return model.objects.filter(**{lookup: tenant.pk})

    # --- fixtures -----------------------------------------------------------------------------
    @pytest.fixture
    def world(self, make_user, client_for):
        a = Tenant.objects.create(name="Iso A", slug="iso-a")
        b = Tenant.objects.create(name="Iso B", slug="iso-b")
        user_a = make_user("iso-user-a", self.tenant_role, a)
        user_b = make_user("iso-user-b", self.tenant_role, b)
        own = self.make_object(a, user_a)
        theirs = self.make_object(b, user_b)
        return {"a": a, "b": b, "client": client_for(user_a), "own": own, "theirs": theirs}

    def url(self, suffix: str, *args: Any) -> str:
        return reverse(f"{self.basename}-{suffix}", args=args)

    # --- the proofs ---------------------------------------------------------------------------
    def test_list_shows_own_never_theirs(self, world):
        response = world["client"].get(self.url("list"), {"page_size": 1000})
        assert response.status_code == 200
        ids = {row["id"] for row in response.json()["results"]}
        assert world["own"].pk in ids
        assert world["theirs"].pk not in ids

    def test_retrieve_theirs_is_404(self, world):
        assert world["client"].get(self.url("detail", world["own"].pk)).status_code == 200
        assert world["client"].get(self.url("detail", world["theirs"].pk)).status_code == 404

    def test_update_theirs_is_404_and_unchanged(self, world):
        before = self._state(world["theirs"])
        url = self.url("detail", world["theirs"].pk)
        allowed = (404,) if self.supports_update else (404, 405)
        patch = world["client"].patch(url, self.update_payload(), format="json")
        assert patch.status_code in allowed
        put = world["client"].put(url, self.update_payload(), format="json")
        assert put.status_code in (404, 405)
        assert self._state(world["theirs"]) == before

    def test_delete_theirs_is_404_and_kept(self, world):
        response = world["client"].delete(self.url("detail", world["theirs"].pk))
        assert response.status_code in ((404,) if self.supports_delete else (404, 405))
        assert type(world["theirs"]).objects.filter(pk=world["theirs"].pk).exists()

    def test_custom_actions_on_theirs_are_404(self, world):
        for method, name in self.custom_actions:
            before = self._state(world["theirs"])
            response = getattr(world["client"], method)(self.url(name, world["theirs"].pk), {}, format="json")
            assert response.status_code == 404, (name, response.status_code)
            assert self._state(world["theirs"]) == before

    def test_filters_cannot_reach_theirs(self, world):
        for field in self.filter_fields:
            response = world["client"].get(self.url("list"), {field: world["b"].pk})
            assert response.status_code in (200, 400)
            if response.status_code == 200:
                ids = {row["id"] for row in response.json()["results"]}
                assert world["theirs"].pk not in ids

    def test_mass_assignment_never_lands_in_other_tenant(self, world):
        if not self.supports_create:
            response = world["client"].post(self.url("list"), {}, format="json")
            assert response.status_code in (403, 405)
            return
        count_b = self.objects_of(world["b"]).count()
        response = world["client"].post(self.url("list"), self.create_payload(world["b"]), format="json")
        assert response.status_code < 500, response.content
        assert self.objects_of(world["b"]).count() == count_b
        if response.status_code == 201:
            body = response.json()
            assert body.get("tenant") in (None, world["a"].pk)
            assert body.get("status") != "ready" or "status" not in self.create_payload(world["b"])

    def test_anonymous_is_401(self, world, client):
        response = client.get(self.url("list"))
        assert response.status_code in (401, 403)
        assert response.json()["code"] in {"not_authenticated", "authentication_failed"}

    def _state(self, obj) -> dict:
        from console.tenancy.audit import snapshot

        fresh = type(obj).objects.filter(pk=obj.pk).first()
        return snapshot(fresh) if fresh is not None else {}


# --- the leak scan: nothing a tenant is shown names another tenant's things -------------------
#
# The suite above proves that tenant A cannot *reach* tenant B's objects by id. The scan proves
# that nothing A is shown *names* them: every page, every API response (lists, details, errors)
# and every live message A receives is searched for B's identifying strings (its hosts' names,
# reservation names, user names, its slug and name). The crawl is generic: it walks every URL
# pattern of the project and fills each parameter from the values in ``ScanWorld.params``, so a
# new page or endpoint is scanned without being listed (tests/platform/test_tenant_leaks.py).

#: The route parameters the scan knows how to fill (tests/platform/test_tenant_leaks.py fills
#: each of them; test_isolation_coverage.py fails on a route with any other).
SCAN_PARAMETERS = frozenset(
    {
        "pk",
        "agent_pk",
        "fabric_id",
        "fabric_pk",
        "design_id",
        "revision",
        "number",
        "other",
        "fmt",
        "change_id",
        "job_id",
        "run_id",
        "switch",
        "link_id",
        "node_id",
        # the UFM-compatible API (console/ufm/urls.py)
        "fabric",
        "pkey",
        "guids",
        "rest",
    }
)
FORMAT_SUFFIX = "(?P<format>"
_REGEX_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")
_PATH_PARAM = re.compile(r"<(?:\w+:)?(\w+)>")


def url_routes() -> list[tuple[str, str]]:
    """(route template with ``{param}`` holes, URL name) of every URL pattern of the project;
    DRF's format-suffix twins are left out (the same view, another renderer)."""

    def walk(resolver: URLResolver, prefix: str) -> Iterator[tuple[str, str]]:
        for pattern in resolver.url_patterns:
            text = str(pattern.pattern)
            if FORMAT_SUFFIX in text or "<drf_format_suffix:" in text:
                continue
            text = text.removeprefix("^").removesuffix("$")
            text = _PATH_PARAM.sub(r"{\1}", _REGEX_GROUP.sub(r"{\1}", text))
            if isinstance(pattern, URLResolver):
                yield from walk(pattern, prefix + text)
            elif isinstance(pattern, URLPattern):
                yield "/" + prefix + text, pattern.name or ""

    return sorted(set(walk(get_resolver(), "")))


def route_params(route: str) -> list[str]:
    return re.findall(r"\{(\w+)\}", route)


def fill_route(route: str, params: dict[str, list[str]]) -> list[str]:
    """Every URL of ``route`` with its parameters taken from ``params`` (KeyError: unknown)."""
    names = route_params(route)
    urls = []
    for values in itertools.product(*(params[name] for name in names)):
        url = route
        for name, value in zip(names, values, strict=True):
            url = url.replace("{" + name + "}", value, 1)
        urls.append(url)
    return urls


def leaked(text: str, secrets: Iterable[str], asked: str = "") -> list[str]:
    """The ``secrets`` that ``text`` names as whole words (a host ``dgx-3`` is not in
    ``dgx-31``); a secret the request itself spelled out (a name in the URL) is not a leak."""
    out = []
    for secret in secrets:
        if secret.lower() in asked.lower():
            continue
        if re.search(rf"(?<![\w-]){re.escape(secret)}(?![\w-])", text, re.IGNORECASE):
            out.append(secret)
    return sorted(out)
