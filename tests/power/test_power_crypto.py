"""BMC passwords at rest: Fernet with CONSOLE_BMC_KEY when set, else a key derived from SECRET_KEY
(HKDF); a token made under one key is refused under another rather than misread."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from console.power import crypto


def test_configured_key_is_used_and_a_foreign_token_is_refused(settings):
    key = Fernet.generate_key().decode()
    settings.CONSOLE_BMC_KEY = key
    token = crypto.encrypt("pw-1")
    # the configured key itself decrypts it (independently of console.power.crypto)
    assert Fernet(key.encode()).decrypt(token.encode()) == b"pw-1"
    assert crypto.decrypt(token) == "pw-1"
    settings.CONSOLE_BMC_KEY = Fernet.generate_key().decode()
    with pytest.raises(crypto.CredentialError):
        crypto.decrypt(token)


def test_derived_key_depends_on_secret_key(settings):
    settings.CONSOLE_BMC_KEY = ""
    settings.SECRET_KEY = "one-secret-" + "a" * 40
    token = crypto.encrypt("pw-2")
    assert "pw-2" not in token and crypto.decrypt(token) == "pw-2"
    settings.SECRET_KEY = "another-secret-" + "b" * 40
    with pytest.raises(crypto.CredentialError):
        crypto.decrypt(token)
    assert crypto.encrypt("") == "" and crypto.decrypt("") == ""
