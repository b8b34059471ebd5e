from django.urls import path
from rest_framework.routers import DefaultRouter

from console.telemetry.api import health_views, search_views, validation_views, views

router = DefaultRouter()
router.register("telemetry/events", views.FabricEventViewSet, basename="fabric-event")

urlpatterns = [
    path("fabrics/<int:fabric_id>/health-policy/", health_views.HealthPolicyView.as_view(), name="health-policy"),
    path(
        "fabrics/<int:fabric_id>/health-policy/preview/",
        health_views.HealthPolicyPreviewView.as_view(),
        name="health-policy-preview",
    ),
    path("fabrics/<int:fabric_id>/port-decisions/", health_views.PortDecisionsView.as_view(), name="port-decisions"),
    path(
        "fabrics/<int:fabric_id>/validation/",
        validation_views.FabricValidationView.as_view(),
        name="fabric-validation",
    ),
    path(
        "fabrics/<int:fabric_id>/validation/<int:run_id>/",
        validation_views.FabricValidationRunView.as_view(),
        name="fabric-validation-run",
    ),
    path(
        "fabrics/<int:fabric_id>/validation/<int:run_id>/csv/",
        validation_views.FabricValidationCsvView.as_view(),
        name="fabric-validation-csv",
    ),
    path("overview/", views.OverviewView.as_view(), name="overview"),
    path("search/", search_views.SearchView.as_view(), name="search"),
    path("telemetry/fabrics/<int:fabric_id>/snapshot/", views.LiveSnapshotView.as_view(), name="telemetry-snapshot"),
    path("telemetry/fabrics/<int:fabric_id>/history/", views.HistoryView.as_view(), name="telemetry-history"),
    path(
        "telemetry/fabrics/<int:fabric_id>/switches/<str:switch>/ports/",
        views.SwitchPortsView.as_view(),
        name="telemetry-switch-ports",
    ),
    path(
        "telemetry/fabrics/<int:fabric_id>/links/<path:link_id>/", views.LinkDetailView.as_view(), name="telemetry-link"
    ),
]
