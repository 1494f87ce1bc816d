"""Shared fixtures: a throwaway copy of the project, so no test edits the repo's own files."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from newsletter.config.settings import Settings, load_settings
from newsletter.database import Database, open_database
from newsletter.issues import load_issue
from newsletter.models import Issue, RenderedEmail
from newsletter.rendering.render import render_issue

# The throwaway PostgreSQL cluster (one per session) and a fresh database per test.
from support.postgres import postgres_cluster, postgres_url  # noqa: F401
from support.project import copy_project, publish_all

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("NEWSLETTER_CHROMIUM", "/usr/bin/chromium")
# As root, in a container, with no network but loopback (see the project's notes on Chromium).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-dev-shm-usage",
]

# A test's client waits as long as the test may: httpx's own 5 s default turned a loaded machine's
# slow answer (a serve started beside a full suite) into a failed test. A hang still fails, by
# pytest-timeout; a call that gives its own timeout keeps it. Code under test gives its own.
PATIENT = httpx.Timeout(120.0)


def _make_httpx_patient() -> None:
    for function in (
        httpx.request,
        httpx.get,
        httpx.options,
        httpx.head,
        httpx.post,
        httpx.put,
        httpx.patch,
        httpx.delete,
    ):
        defaults = function.__kwdefaults__
        if defaults is not None and "timeout" in defaults:
            defaults["timeout"] = PATIENT
    for client in (httpx.Client, httpx.AsyncClient):
        defaults = client.__init__.__kwdefaults__
        if defaults is not None and "timeout" in defaults:
            defaults["timeout"] = PATIENT


_make_httpx_patient()


@pytest.fixture(autouse=True, scope="session")
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's cache folder (state/usercache.py) of this test process and of every
    `newsletter` it starts: one per test process, never the real user's, so compiled templates
    are shared by its tests as they are by one editor's commands."""
    folder = tmp_path_factory.mktemp("user-cache")
    os.environ["XDG_CACHE_HOME"] = str(folder)
    return folder


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Path:
    """A copy of the project in tmp_path, made the working directory. Its commands share the
    test process's user cache (compiled templates, spam scores: see `user_cache`), except in a
    test of SpamAssassin's run (marked `spamassassin`), which starts with an empty one."""
    if request.node.get_closest_marker("spamassassin") is not None:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    root = copy_project(tmp_path / "project")
    monkeypatch.chdir(root)
    for var in ("NEWSLETTER_SECRET", "NEWSLETTER_SECRET_PREVIOUS", "NEWSLETTER_SMTP_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    return root


@pytest.fixture
def all_published(project: Path) -> Path:
    """The project copy with every issue file on the archive, sent or not (see publish_all)."""
    publish_all(project)
    return project


@pytest.fixture
def settings(project: Path) -> Settings:
    return load_settings(project / "newsletter.toml", environ={})


# Issue 14 rendered with each inliner: the render and reader tests hold both to one standard.
@pytest.fixture(params=["css-inline", "premailer"])
def inliner_settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    render = settings.render.model_copy(update={"inliner": request.param})
    return settings.model_copy(update={"render": render})


@pytest.fixture
def issue(settings: Settings) -> Issue:
    return load_issue(settings.issues_dir, 14)


@pytest.fixture
def rendered(issue: Issue, inliner_settings: Settings) -> RenderedEmail:
    return render_issue(issue, inliner_settings)


def _unavailable() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return (
            f"Chromium not found at {CHROMIUM} (apt-get install chromium, or NEWSLETTER_CHROMIUM)"
        )
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium for the browser tests: skipped without it, except in CI (CI=true).

    One per module, not per session: Playwright's sync API keeps its event loop marked as
    running in this thread while it is open, and every async test after it would fail."""
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the real browser: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(params=["sqlite", "postgres"])
def database_target(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where an outbox lives: a SQLite file, or a new database on the session's PostgreSQL."""
    if request.param == "sqlite":
        return tmp_path / "state" / "outbox.sqlite3"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def database(database_target: Path | str) -> Iterator[Database]:
    """An open outbox on each backend in turn."""
    box = open_database(database_target)
    yield box
    box.close()
