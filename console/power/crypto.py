"""BMC credentials encrypted at rest (:class:`console.tenancy.crypto.SecretBox`) with a key from
``settings.CONSOLE_BMC_KEY`` (a Fernet key, from the environment) or, when that is unset, one
derived from ``SECRET_KEY`` (its own label). A rotated SECRET_KEY stays in SECRET_KEY_FALLBACKS
until ``manage.py rotate_secrets`` has re-encrypted them (console.tenancy.crypto)."""

from __future__ import annotations

from console.tenancy.crypto import CredentialError, SecretBox, box

__all__ = ["CredentialError", "decrypt", "encrypt"]


def _box() -> SecretBox:
    return box("bmc")


def encrypt(plain: str) -> str:
    """A Fernet token (ASCII) for ``plain``; empty stays empty."""
    return _box().encrypt(plain)


def decrypt(token: str) -> str:
    """The plaintext of :func:`encrypt`'s ``token``."""
    return _box().decrypt(token)
