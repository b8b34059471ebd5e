"""ASGI entry point: HTTP through Django, WebSockets through Channels (auth + Origin checked)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
# No persistent database connections under ASGI (Django's advice): each request's sync code runs
# in a thread of its own, so a kept connection is never reused, only left open (settings.py).
os.environ.setdefault("CONSOLE_DB_CONN_MAX_AGE", "0")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from console.live.auth import TokenOrSessionAuthMiddleware  # noqa: E402
from console.live.origin import OriginValidator  # noqa: E402
from console.live.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": OriginValidator(TokenOrSessionAuthMiddleware(URLRouter(websocket_urlpatterns))),
    }
)
