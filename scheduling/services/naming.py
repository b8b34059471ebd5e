"""The name a reservation gets when its request gives none: readable and unique enough to tell
apart in a list (``<tenant-slug>-<gpus>g-<4 hex>``)."""

from __future__ import annotations

import secrets

from console.tenancy.models import Tenant


def default_name(tenant: Tenant, gpus: int) -> str:
    """E.g. ``acme-16g-3fa9``: the tenant, the size and a short random id."""
    return f"{tenant.slug}-{gpus}g-{secrets.token_hex(2)}"[:100]
