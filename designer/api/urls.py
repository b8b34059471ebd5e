from rest_framework.routers import DefaultRouter

from designer.api import views

router = DefaultRouter()
router.register("designs", views.DesignViewSet, basename="design")
router.register("catalogue", views.CatalogueEntryViewSet, basename="catalogue")
