from rest_framework.routers import DefaultRouter

from scheduling.api import views

router = DefaultRouter()
router.register("pools", views.PoolViewSet, basename="pool")
router.register("quotas", views.QuotaViewSet, basename="quota")
router.register("reservations", views.ReservationViewSet, basename="reservation")
