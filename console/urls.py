"""URL root: pages, the API under /api/, the UFM-compatible P_Key API under /ufmRest/, health and readiness."""

from django.urls import include, path

from console.telemetry.api.views import metrics
from console.web import views as web_views

urlpatterns = [
    path("api/", include("console.api_urls")),
    path("healthz", web_views.healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("oidc/", include("mozilla_django_oidc.urls")),  # sign-in through OpenID Connect (console.tenancy.oidc)
    path("", include("console.ufm.urls")),
    path("", include("console.web.urls")),
]

handler400 = "console.web.views.bad_request"
handler403 = "console.web.views.forbidden"
handler404 = "console.web.views.not_found"
handler500 = "console.web.views.server_error"
