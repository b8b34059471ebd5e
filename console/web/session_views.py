"""Logging out ends the session's live sockets too, not only its cookie."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse

from console.broadcast import close_session_sockets


class LogoutView(auth_views.LogoutView):
    """Django's logout, then every socket this browser session opened is told to close."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        session_key = request.session.session_key
        response = super().post(request, *args, **kwargs)
        if session_key:
            close_session_sockets(session_key)
        return response
