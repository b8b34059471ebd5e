"""The console's URLs plus two views that raise, for the 500 tests."""

from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("secret-internal-detail")


urlpatterns = [
    path("boom/", boom),
    path("api/boom/", boom),
    path("", include("console.urls")),
]
handler400 = "console.web.views.bad_request"
handler403 = "console.web.views.forbidden"
handler404 = "console.web.views.not_found"
handler500 = "console.web.views.server_error"
