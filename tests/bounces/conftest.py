"""One Dovecot per test session for the bounce tests (it takes about half a second to start),
and the mailbox providers whose DKIM-signed reports prove where they come from."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from support.dovecot import dovecot  # noqa: F401
from support.providers import Provider, run_providers


@pytest.fixture(scope="session")
def provider_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def provider(provider_key: rsa.RSAPrivateKey) -> Iterator[Provider]:
    with run_providers(provider_key) as running:
        yield running
