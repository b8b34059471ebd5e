from django.urls import path

from console.power.api import energy_views, views

urlpatterns = [
    path("energy/", energy_views.EnergyView.as_view(), name="energy"),
    path("nodes/<int:node_id>/power/", views.NodePowerView.as_view(), name="node-power"),
    path("nodes/<int:node_id>/bmc/", views.NodeBmcView.as_view(), name="node-bmc"),
]
