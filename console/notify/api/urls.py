from django.urls import path
from rest_framework.routers import DefaultRouter

from console.notify.api import views

router = DefaultRouter()
router.register("webhooks", views.WebhookViewSet, basename="webhook")

urlpatterns = [
    path("me/notifications/", views.PreferenceView.as_view(), name="notification-preferences"),
]
