"""WebSocket routes: the notification stream and the live fabric, tenant and change streams."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.urls import path, re_path

from console.live import consumers
from console.live.agent_consumer import AgentConsumer

if TYPE_CHECKING:
    from channels.consumer import _ASGIApplicationProtocol
    from channels.routing import URLRouter, _ExtendedURLPattern


def _route(route: str, consumer: _ASGIApplicationProtocol) -> _ExtendedURLPattern:
    # django-stubs' path() knows only views returning responses; Channels routes consumers with it.
    return path(route, consumer)  # type: ignore[arg-type,return-value]


websocket_urlpatterns: list[_ExtendedURLPattern | URLRouter] = [
    _route("ws/notifications/", consumers.NotificationsConsumer.as_asgi()),
    _route("ws/live/fabric/<int:object_id>/", consumers.FabricConsumer.as_asgi()),
    _route("ws/live/tenant/<int:object_id>/", consumers.TenantConsumer.as_asgi()),
    _route("ws/live/change/<int:object_id>/", consumers.ChangeConsumer.as_asgi()),
    re_path(r"", consumers.NoRouteConsumer.as_asgi()),  # type: ignore[arg-type,list-item]  # (else: 4404)
]

#: The agents' socket (console/live/agent_consumer.py): routed outside the browsers' Origin check.
agent_urlpatterns: list[_ExtendedURLPattern | URLRouter] = [_route("ws/agent/", AgentConsumer.as_asgi())]
