from django.urls import path

from console.power.api import views

urlpatterns = [
    path("nodes/<int:node_id>/power/", views.NodePowerView.as_view(), name="node-power"),
    path("nodes/<int:node_id>/bmc/", views.NodeBmcView.as_view(), name="node-bmc"),
]
