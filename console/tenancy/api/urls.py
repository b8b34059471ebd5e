from rest_framework.routers import DefaultRouter

from console.tenancy.api import views

router = DefaultRouter()
router.register("tenants", views.TenantViewSet, basename="tenant")
router.register("members", views.MembershipViewSet, basename="member")
router.register("tokens", views.ApiTokenViewSet, basename="token")
router.register("audit", views.AuditEntryViewSet, basename="audit")
