"""The REST API root: every app's router under /api/."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
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

urlpatterns = [
    path("me/", MeView.as_view(), name="me"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("", include(discovery_urls.urlpatterns)),
    path("", include(telemetry_urls.urlpatterns)),
    path("", include(router.urls)),
]
