"""One Dovecot per test session for the bounce tests (it takes about half a second to start),
and the mailbox providers whose DKIM-signed reports prove where they come from."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from support.dovecot import Dovecot, available, run_dovecot
from support.providers import Provider, run_providers


@pytest.fixture(scope="session")
def dovecot() -> Iterator[Dovecot]:
    reason = available()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with run_dovecot() as server:
        yield server


@pytest.fixture(scope="session")
def provider_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def provider(provider_key: rsa.RSAPrivateKey) -> Iterator[Provider]:
    with run_providers(provider_key) as running:
        yield running
