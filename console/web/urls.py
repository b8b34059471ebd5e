from django.contrib.auth import views as auth_views
from django.urls import path

from console.web import (
    designer_views,
    fabric_change_views,
    fabric_table_views,
    fabric_views,
    live_views,
    login_views,
    notify_views,
    reservation_views,
    search_views,
    session_views,
    usage_views,
    views,
)

app_name = "web"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", session_views.LogoutView.as_view(), name="logout"),
    path("designer/", designer_views.designer_new, name="designer"),
    path("designer/canvas/", designer_views.designer_canvas, name="designer-canvas"),
    path("designer/import/", designer_views.designer_import, name="designer-import"),
    path("designer/<int:design_id>/", designer_views.designer_design, name="designer-design"),
    path(
        "designer/<int:design_id>/r/<int:revision>/",
        designer_views.designer_design,
        name="designer-revision",
    ),
    path("fabrics/", fabric_views.fabrics, name="fabrics"),
    path("fabrics/<int:fabric_id>/", fabric_views.fabric_detail, name="fabric"),
    path("fabrics/<int:fabric_id>/live/", live_views.fabric_live, name="fabric-live"),
    path("live/", live_views.live_home, name="live"),
    path("fabrics/<int:fabric_id>/changes/", fabric_change_views.fabric_changes, name="fabric-changes"),
    path("fabrics/<int:fabric_id>/ports/", fabric_table_views.fabric_ports, name="fabric-ports"),
    path("fabrics/<int:fabric_id>/events/", fabric_table_views.fabric_events, name="fabric-events"),
    path(
        "fabrics/<int:fabric_id>/changes/<int:change_id>/",
        fabric_change_views.fabric_change,
        name="fabric-change",
    ),
    path("reservations/", reservation_views.reservations, name="reservations"),
    path("reservations/all/", reservation_views.reservations_all, name="reservations-all"),
    path("reservations/list/", reservation_views.reservations_list, name="reservations-list"),
    path("reservations/quotas/", reservation_views.reservation_quotas, name="reservation-quotas"),
    path(
        "reservations/occupancy/",
        reservation_views.reservation_occupancy,
        name="reservation-occupancy",
    ),
    path("reservations/<int:pk>/", reservation_views.reservation_detail, name="reservation"),
    path(
        "reservations/<int:pk>/connection/",
        reservation_views.reservation_connection,
        name="reservation-connection",
    ),
    path("reservations/<int:pk>/use/", usage_views.reservation_use, name="reservation-use"),
    path("reservations/<int:pk>/use.env", usage_views.reservation_use_env, name="reservation-use-env"),
    path("search/", search_views.search_page, name="search"),
    path("audit/", views.audit_log, name="audit"),
    path("tenants/", views.tenants, name="tenants"),
    path("logins/locked/", login_views.locked, name="locked-logins"),
    path("account/password/", login_views.change_password, name="password"),
    path("logins/locked/unlock/", login_views.unlock, name="locked-logins-unlock"),
    path("tokens/", views.tokens, name="tokens"),
    path("notifications/", notify_views.notifications, name="notifications"),
    path("notifications/webhooks/<int:pk>/test/", notify_views.webhook_test, name="webhook-test"),
    path("notifications/webhooks/<int:pk>/delete/", notify_views.webhook_delete, name="webhook-delete"),
    path("tokens/<int:pk>/revoke/", views.revoke_token, name="token-revoke"),
]
