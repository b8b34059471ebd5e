"""BMC credentials encrypted at rest (:class:`console.tenancy.crypto.SecretBox`) with a key from
``settings.CONSOLE_BMC_KEY`` (a Fernet key, from the environment) or, when that is unset, one
derived from ``SECRET_KEY`` (its own label). Rotating SECRET_KEY without CONSOLE_BMC_KEY makes
stored passwords unreadable: set them again (``PUT /api/nodes/<id>/bmc/``)."""

from __future__ import annotations

from django.conf import settings

from console.tenancy.crypto import CredentialError, SecretBox

__all__ = ["CredentialError", "decrypt", "encrypt"]


def _box() -> SecretBox:
    return SecretBox(
        getattr(settings, "CONSOLE_BMC_KEY", ""), settings.SECRET_KEY, b"ibconsole bmc credentials v1", "BMC password"
    )


def encrypt(plain: str) -> str:
    """A Fernet token (ASCII) for ``plain``; empty stays empty."""
    return _box().encrypt(plain)


def decrypt(token: str) -> str:
    """The plaintext of :func:`encrypt`'s ``token``."""
    return _box().decrypt(token)
