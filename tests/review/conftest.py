"""The Chromium the screenshot tests give `diff --html` and `shots` (the configured executable,
as an editor's --chromium is): skipped without it, except in CI (CI=true), as the browser
fixture of tests/conftest.py is."""

from __future__ import annotations

import os

import pytest

from newsletter.review.shots import shots_missing


@pytest.fixture
def chromium() -> str:
    path = os.environ.get("NEWSLETTER_CHROMIUM", "/usr/bin/chromium")
    missing = shots_missing(path)
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the real browser: {missing}")
        pytest.skip(missing)
    return path
