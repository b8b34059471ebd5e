from django.contrib.auth import views as auth_views
from django.urls import path

from console.web import views

app_name = "web"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("audit/", views.audit_log, name="audit"),
    path("tenants/", views.tenants, name="tenants"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.revoke_token, name="token-revoke"),
]
