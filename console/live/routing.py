from django.urls import path

from console.live import consumers

websocket_urlpatterns = [
    path("ws/notifications/", consumers.NotificationsConsumer.as_asgi()),
    path("ws/live/fabric/<int:object_id>/", consumers.FabricConsumer.as_asgi()),
    path("ws/live/tenant/<int:object_id>/", consumers.TenantConsumer.as_asgi()),
    path("ws/live/change/<int:object_id>/", consumers.ChangeConsumer.as_asgi()),
]
