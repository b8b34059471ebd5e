from django.urls import path

from console.power.api import energy_views, policy_views, views

urlpatterns = [
    path("energy/", energy_views.EnergyView.as_view(), name="energy"),
    path("nodes/<int:node_id>/power/", views.NodePowerView.as_view(), name="node-power"),
    path("nodes/<int:node_id>/power/pin/", policy_views.NodePowerPinView.as_view(), name="node-power-pin"),
    path("nodes/<int:node_id>/bmc/", views.NodeBmcView.as_view(), name="node-bmc"),
    path("pools/<int:pk>/power-policy/", policy_views.PoolPowerPolicyView.as_view(), name="pool-power-policy"),
    path(
        "pools/<int:pk>/power-policy/run/", policy_views.PoolPowerPolicyRunView.as_view(), name="pool-power-policy-run"
    ),
    path(
        "pools/<int:pk>/power-policy/runs/",
        policy_views.PoolPowerPolicyRunsView.as_view(),
        name="pool-power-policy-runs",
    ),
]
