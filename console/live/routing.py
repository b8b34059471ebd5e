from django.urls import path

from console.live import consumers

websocket_urlpatterns = [
    path("ws/notifications/", consumers.NotificationsConsumer.as_asgi()),
]
