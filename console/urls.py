"""URL root: pages, the API under /api/, health and readiness."""

from django.urls import include, path

from console.web import views as web_views

urlpatterns = [
    path("api/", include("console.api_urls")),
    path("healthz", web_views.healthz, name="healthz"),
    path("", include("console.web.urls")),
]

handler404 = "console.web.views.not_found"
handler500 = "console.web.views.server_error"
