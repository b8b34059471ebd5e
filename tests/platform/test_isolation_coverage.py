"""Meta-test: every API viewset is tenant-scoped and covered by the isolation suite."""

import importlib
import pkgutil

import pytest

import tests
from console.api_urls import router
from console.tenancy.api.base import GlobalResourceMixin, TenantScopedMixin
from tests.isolation import COVERED_VIEWSETS, SCAN_PARAMETERS, route_params, url_routes

# Viewsets over data that belongs to no tenant (fabric designs, the hardware catalogue) derive from
# GlobalResourceMixin, must say why, and must be named here so adding one is a reviewed decision.
GLOBAL_VIEWSET_NAMES = {
    "DesignViewSet",
    "CatalogueEntryViewSet",
    "PoolViewSet",
    "FabricViewSet",
    "FabricPartitionViewSet",
    "FabricChangeViewSet",
    "FabricPortViewSet",
    "SiteViewSet",
    "SiteLinkViewSet",
}


def _import_all_test_modules() -> None:
    for module in pkgutil.walk_packages(tests.__path__, "tests."):
        if module.name.rsplit(".", 1)[-1].startswith("test_"):
            importlib.import_module(module.name)


@pytest.mark.smoke
def test_every_viewset_is_scoped_and_covered():
    _import_all_test_modules()
    registered = {viewset for _, viewset, _ in router.registry}
    assert registered, "no viewsets registered?"
    global_ = {v for v in registered if issubclass(v, GlobalResourceMixin)}
    assert {v.__name__ for v in global_} <= GLOBAL_VIEWSET_NAMES, "unreviewed global viewset"
    assert all(v.global_reason for v in global_)
    unscoped = [v.__name__ for v in registered if not issubclass(v, TenantScopedMixin) and v not in global_]
    assert not unscoped, f"viewsets bypassing the tenant-scoped base class: {unscoped}"
    uncovered = [v.__name__ for v in registered if v not in COVERED_VIEWSETS and v not in global_]
    assert not uncovered, f"viewsets without an IsolationSuite subclass: {uncovered}"


@pytest.mark.smoke
def test_scoped_viewsets_cannot_override_get_queryset():
    from console.tenancy.api.base import TenantScopedModelViewSet
    from console.tenancy.models import Tenant

    with pytest.raises(TypeError, match="narrow_queryset"):

        class Leaky(TenantScopedModelViewSet):
            queryset = Tenant.objects.all()

            def get_queryset(self):
                return Tenant.objects.all()


@pytest.mark.smoke
def test_the_leak_scan_can_fill_every_route():
    """The leak scan (tests/platform/test_tenant_leaks.py) requests every route of the project;
    a route with a parameter it cannot fill would go unscanned, so it fails here instead."""
    routes = url_routes()
    assert any(name == "fabric-live" for _, name in routes) and any(name == "reservation-list" for _, name in routes)
    unknown = {p for route, _ in routes for p in route_params(route)} - SCAN_PARAMETERS
    assert not unknown, f"tell the leak scan what to try for {sorted(unknown)}"
