"""The fabric's management keys: generated once per fabric, stored encrypted, rendered into
``opensm.conf`` by every push (:class:`~console.fabric.opensm.push_types.SmKeys`).

``m_key`` with protection level 2 means a host's owner, who can send SMPs from its HCA, cannot
rewrite another port's PortInfo or P_Key table on hardware that enforces M_Key; ``sm_key`` means
no subnet manager without it is handed the subnet (OpenSM ignores an SM whose SM_Key differs);
``sa_key`` guards the SA's trusted operations. Secrets are encrypted with
``CONSOLE_FABRIC_KEY`` (a Fernet key) or a key derived from ``SECRET_KEY``
(:class:`console.tenancy.crypto.SecretBox`) and never leave the console except in the push to
the SM host; the API shows a fingerprint. What ibsim does not enforce: docs/operations.md,
"Isolation".
"""

from __future__ import annotations

import hashlib
import secrets

from django.db import IntegrityError, transaction

from console.fabric.models import Fabric, FabricKeys
from console.fabric.opensm.push_types import SmKeys
from console.tenancy.crypto import SecretBox, box

#: Drivers whose SM host reads opensm.conf (a UFM appliance keeps its own keys).
OPENSM_DRIVERS = frozenset({Fabric.Driver.LAB, Fabric.Driver.OPENSM, Fabric.Driver.AGENT})


def _box() -> SecretBox:
    return box("fabric")


def _new_key() -> str:
    return f"{secrets.randbits(63) | 1 << 62:#018x}"  # never 0 (OpenSM's "no key") nor 1 (its default)


def keys_for(fabric: Fabric) -> SmKeys | None:
    """The fabric's keys, generated on first use; None for drivers that do not take them."""
    if fabric.driver not in OPENSM_DRIVERS:
        return None
    row = FabricKeys.objects.filter(fabric=fabric).first()
    if row is None:
        box = _box()
        try:
            with transaction.atomic():
                row = FabricKeys.objects.create(
                    fabric=fabric,
                    m_key_encrypted=box.encrypt(_new_key()),
                    sm_key_encrypted=box.encrypt(_new_key()),
                    sa_key_encrypted=box.encrypt(_new_key()),
                )
        except IntegrityError:  # another worker made them first
            row = FabricKeys.objects.get(fabric=fabric)
    box = _box()
    return SmKeys(
        m_key=int(box.decrypt(row.m_key_encrypted), 16),
        sm_key=int(box.decrypt(row.sm_key_encrypted), 16),
        sa_key=int(box.decrypt(row.sa_key_encrypted), 16),
        protection_level=row.m_key_protection_level,
        lease_period=row.m_key_lease_period,
    )


def fingerprint(fabric: Fabric) -> str | None:
    """A short, one-way fingerprint of the fabric's keys (operators tell keys apart by it)."""
    keys = keys_for(fabric) if FabricKeys.objects.filter(fabric=fabric).exists() else None
    if keys is None:
        return None
    digest = hashlib.sha256(f"{keys.m_key}:{keys.sm_key}:{keys.sa_key}".encode()).hexdigest()
    return f"sha256:{digest[:12]}"
