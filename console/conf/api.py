"""The REST API's settings: DRF's (authentication, permissions, pagination, parsers, throttles,
errors) and drf-spectacular's (the OpenAPI document, docs/openapi.yaml). Imported by
console.settings."""

from __future__ import annotations

import os

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "console.tenancy.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["console.tenancy.permissions.ConsolePermission"],
    "DEFAULT_PAGINATION_CLASS": "console.tenancy.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "console.tenancy.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "console.tenancy.api.errors.exception_handler",
    # Rates live in CONSOLE_THROTTLE_RATES (block LOGIN AND API THROTTLING below); the classes read
    # them at request time, so tests can override them.
    "DEFAULT_THROTTLE_CLASSES": [
        "console.tenancy.throttling.SessionRateThrottle",
        "console.tenancy.throttling.TokenRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {},
    "NUM_PROXIES": int(os.environ.get("CONSOLE_TRUSTED_PROXIES", "0")),
}
# The browsable API's forms list related objects of every tenant: scoped (console/tenancy/api/renderers.py).
REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"] = [
    "rest_framework.renderers.JSONRenderer",
    "console.tenancy.api.renderers.ScopedBrowsableAPIRenderer",
]
SPECTACULAR_SETTINGS = {
    "TITLE": "InfiniBand console API",
    "DESCRIPTION": "Design fabrics, pool GPUs, reserve them, push partitions, watch the fabric.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI assets ship in a package: no CDN, works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No deep links: Swagger UI puts each one (an <a href>) inside the operation's toggle button,
    # a link nested in a button that keyboards and screen readers cannot tell apart (axe:
    # nested-interactive).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    # Every operation's error statuses with the one error body (401/403/404/429/503, 400, 409...).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "console.tenancy.api.schema.add_error_responses",
    ],
    # Several models have a `status`; name the fabric pipeline's enums explicitly.
    "ENUM_NAME_OVERRIDES": {
        "ChangeStatusEnum": "console.fabric.models.ChangeRequest.Status",
        # A discovery job and a validation run share their states (queued, running, done, failed).
        "DiscoveryJobStateEnum": "console.fabric.models.DiscoveryJob.State",
        "ChangeStepStatusEnum": "console.fabric.models.ChangeStep.Status",
        "DriverEnum": "console.fabric.models.Fabric.Driver",
        "BmcDriverEnum": "console.power.models.Bmc.Driver",
        "PowerStateEnum": "scheduling.models.Node.Power",
        # Two "source" choices: a partition's keeps the name it always had.
        "SourceEnum": "console.fabric.models.FabricPartition.Source",
        "SiteLinkSourceEnum": "console.fabric.models.SiteLink.Source",
    },
}
