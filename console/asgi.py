"""ASGI entry point: HTTP through Django, WebSockets through Channels (auth + Origin checked)."""

import os

from django.core.asgi import get_asgi_application
from django.urls import re_path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
# No persistent database connections under ASGI (Django's advice): each request's sync code runs
# in a thread of its own, so a kept connection is never reused, only left open (settings.py).
os.environ.setdefault("CONSOLE_DB_CONN_MAX_AGE", "0")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from console.live.auth import TokenOrSessionAuthMiddleware  # noqa: E402
from console.live.origin import OriginValidator  # noqa: E402
from console.live.routing import agent_urlpatterns, websocket_urlpatterns  # noqa: E402

# Agents authenticate with their own token in a header, never a cookie: their socket needs no
# Origin check (a browser page cannot open it with an operator's session).
browsers = OriginValidator(TokenOrSessionAuthMiddleware(URLRouter(websocket_urlpatterns)))
application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": URLRouter([*agent_urlpatterns, re_path(r"", browsers)]),  # type: ignore[list-item,arg-type]
    }
)
