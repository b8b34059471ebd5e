from django.contrib.auth import views as auth_views
from django.urls import path

from console.web import designer_views, views

app_name = "web"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("designer/", designer_views.designer_new, name="designer"),
    path("designer/canvas/", designer_views.designer_canvas, name="designer-canvas"),
    path("designer/<int:design_id>/", designer_views.designer_design, name="designer-design"),
    path(
        "designer/<int:design_id>/r/<int:revision>/",
        designer_views.designer_design,
        name="designer-revision",
    ),
    path("audit/", views.audit_log, name="audit"),
    path("tenants/", views.tenants, name="tenants"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.revoke_token, name="token-revoke"),
]
