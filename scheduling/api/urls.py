from django.urls import path
from rest_framework.routers import DefaultRouter

from scheduling.api import dataset_views, usage_views, views

router = DefaultRouter()
router.register("pools", views.PoolViewSet, basename="pool")
router.register("quotas", views.QuotaViewSet, basename="quota")
router.register("reservations", views.ReservationViewSet, basename="reservation")
router.register("datasets", dataset_views.DatasetViewSet, basename="dataset")

urlpatterns = [path("usage/", usage_views.UsageView.as_view(), name="usage")]
