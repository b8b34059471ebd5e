"""The REST API root: every app's router under /api/."""

import base64
import hashlib
import re
from pathlib import Path

import drf_spectacular
from csp.decorators import csp_update
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from console.fabric.api import discovery_urls
from console.fabric.api import urls as fabric_urls
from console.telemetry.api import urls as telemetry_urls
from console.tenancy.api import urls as tenancy_urls
from console.tenancy.api.views import MeView
from designer.api import urls as designer_urls
from scheduling.api import urls as scheduling_urls

router = DefaultRouter()
for app_router in (
    tenancy_urls.router,
    designer_urls.router,
    scheduling_urls.router,
    fabric_urls.router,
    telemetry_urls.router,
):
    router.registry.extend(app_router.registry)


def _swagger_style_hash() -> str:
    """The CSP hash of the one inline style block of drf-spectacular's Swagger UI page, read from
    the installed template, so /api/docs/ needs no 'unsafe-inline' (its script is a file: the
    split view serves it under ?script)."""
    template = Path(drf_spectacular.__file__).parent / "templates" / "drf_spectacular" / "swagger_ui.html"
    match = re.search(r"<style>(.*?)</style>", template.read_text(), re.S)
    body = match.group(1) if match else ""
    return "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"


swagger_view = csp_update({"style-src": [_swagger_style_hash()]})(
    SpectacularSwaggerSplitView.as_view(url_name="schema")
)

urlpatterns = [
    path("me/", MeView.as_view(), name="me"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", swagger_view, name="docs"),
    path("", include(discovery_urls.urlpatterns)),
    path("", include(telemetry_urls.urlpatterns)),
    path("", include(router.urls)),
]
