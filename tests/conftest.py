"""Shared fixtures: a throwaway copy of the project, so no test edits the repo's own files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from newsletter.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[1]
PROJECT_FILES = (
    "newsletter.toml",
    "issues",
    "templates",
    "subscribers.example.csv",
    "staging.example.csv",
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project in tmp_path, made the working directory."""
    root = tmp_path / "project"
    root.mkdir()
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name)
        else:
            shutil.copy2(source, root / name)
    monkeypatch.chdir(root)
    for var in ("NEWSLETTER_SECRET", "NEWSLETTER_SMTP_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    return root


@pytest.fixture
def settings(project: Path) -> Settings:
    return load_settings(project / "newsletter.toml", environ={})
