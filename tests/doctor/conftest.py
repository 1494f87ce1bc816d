"""The doctor's servers shared by a session: one Dovecot (it takes about half a second)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from support.dovecot import Dovecot, available, run_dovecot


@pytest.fixture(scope="session")
def dovecot() -> Iterator[Dovecot]:
    reason = available()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with run_dovecot() as server:
        yield server
