"""Routes of the discovery API, included under /api/ by console/api_urls.py."""

from django.urls import path

from console.fabric.api.discovery_views import FabricCompareView, FabricDiscoveryJobView, FabricDiscoveryView

urlpatterns = [
    path(
        "fabrics/<int:fabric_id>/discovery/",
        FabricDiscoveryView.as_view(),
        name="fabric-discovery",
    ),
    path(
        "fabrics/<int:fabric_id>/discovery/jobs/<int:job_id>/",
        FabricDiscoveryJobView.as_view(),
        name="fabric-discovery-job",
    ),
    path("fabrics/<int:fabric_id>/compare/", FabricCompareView.as_view(), name="fabric-compare"),
]
