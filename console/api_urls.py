"""The REST API root: every app's router under /api/."""

from typing import Any

from django.urls import include, path
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import DefaultRouter

from console.fabric.api import discovery_urls
from console.fabric.api import urls as fabric_urls
from console.notify.api import urls as notify_urls
from console.power.api import urls as power_urls
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
    notify_urls.router,
):
    router.registry.extend(app_router.registry)


class ConsoleSwaggerView(SpectacularSwaggerSplitView):
    """Swagger UI inside the console's frame (navigation, who is logged in). Its init script is a
    file (the split view serves it under ?script) and it needs no inline style, so the strict CSP
    holds without exceptions."""

    template_name = "web/api_docs.html"

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().get(request, *args, **kwargs)
        if isinstance(response.data, dict):
            response.data["active"] = "api-docs"
        return response


swagger_view = ConsoleSwaggerView.as_view(url_name="schema")

urlpatterns = [
    path("me/", MeView.as_view(), name="me"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", swagger_view, name="docs"),
    path("", include(discovery_urls.urlpatterns)),
    path("", include(telemetry_urls.urlpatterns)),
    path("", include(notify_urls.urlpatterns)),
    path("", include(power_urls.urlpatterns)),
    path("", include(scheduling_urls.urlpatterns)),
    path("", include(router.urls)),
]
