"""``/ufmRest/`` (and ``/ufmRestV2/``, which UFM serves the same resources under) for the default
fabric; ``/ufm/<fabric>/ufmRest/`` for a named one (the endpoint a client is given)."""

from django.urls import include, path, re_path

from console.ufm import views

resources = [
    path("app/ufm_version", views.VersionView.as_view()),
    re_path(r"^resources/pkeys/?$", views.PkeysView.as_view()),
    re_path(r"^resources/pkeys/add/?$", views.CreatePkeyView.as_view()),
    re_path(r"^(?P<rest>resources/pkeys/qos_conf)/?$", views.NotImplementedView.as_view()),
    re_path(r"^resources/pkeys/(?P<pkey>[^/]+)/guids/(?P<guids>[^/]+)/?$", views.PkeyGuidsView.as_view()),
    re_path(r"^resources/pkeys/(?P<pkey>[^/]+)/?$", views.PkeyView.as_view()),
    re_path(r"^actions/remove_guids_from_pkey/?$", views.RemoveGuidsView.as_view()),
    re_path(r"^resources/systems/?$", views.SystemsView.as_view()),
    re_path(r"^resources/ports/?$", views.PortsView.as_view()),
    re_path(r"^(?P<rest>.*)$", views.NotImplementedView.as_view()),
]

urlpatterns = [
    path("ufmRest/", include(resources)),
    path("ufmRestV2/", include(resources)),
    path("ufm/<str:fabric>/ufmRest/", include(resources)),
    path("ufm/<str:fabric>/ufmRestV2/", include(resources)),
]
