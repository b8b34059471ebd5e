"""Routes of the fabric API (registered in console/api_urls.py)."""

from rest_framework.routers import DefaultRouter

from console.fabric.api import site_views, views

router = DefaultRouter()
router.register("fabrics", views.FabricViewSet, basename="fabric")
router.register(
    r"fabrics/(?P<fabric_pk>[0-9]+)/partitions",
    views.FabricPartitionViewSet,
    basename="fabric-partition",
)
router.register(r"fabrics/(?P<fabric_pk>[0-9]+)/ports", views.FabricPortViewSet, basename="fabric-port")
router.register(r"fabrics/(?P<fabric_pk>[0-9]+)/changes", views.FabricChangeViewSet, basename="fabric-change")
router.register("sites", site_views.SiteViewSet, basename="site")
router.register("site-links", site_views.SiteLinkViewSet, basename="site-link")
