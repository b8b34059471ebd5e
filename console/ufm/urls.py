"""``/ufmRest/`` (and ``/ufmRestV2/``, which UFM serves the same resources under) for the default
fabric; ``/ufm/<fabric>/ufmRest/`` for a named one (the endpoint a client is given). Clients spell
collection URLs with and without the trailing slash (ib-kubernetes: ``pkeys/?guids_data=true``;
networking-mlnx-baremetal: ``POST pkeys/``): both are routed."""

from typing import Any

from django.urls import URLPattern, include, path

from console.ufm import views


def both(route: str, view: Any) -> list[URLPattern]:
    return [path(route, view), path(f"{route}/", view)]


resources = [
    *both("app/ufm_version", views.VersionView.as_view()),
    *both("resources/pkeys", views.PkeysView.as_view()),
    *both("resources/pkeys/add", views.CreatePkeyView.as_view()),
    *both("resources/pkeys/qos_conf", views.NotImplementedView.as_view()),
    *both("resources/pkeys/<str:pkey>/guids/<str:guids>", views.PkeyGuidsView.as_view()),
    *both("resources/pkeys/<str:pkey>", views.PkeyView.as_view()),
    *both("actions/remove_guids_from_pkey", views.RemoveGuidsView.as_view()),
    *both("resources/systems", views.SystemsView.as_view()),
    *both("resources/ports", views.PortsView.as_view()),
    path("<path:rest>", views.NotImplementedView.as_view()),
]

urlpatterns = [
    path("ufmRest/", include(resources)),
    path("ufmRestV2/", include(resources)),
    path("ufm/<str:fabric>/ufmRest/", include(resources)),
]
