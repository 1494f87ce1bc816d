"""The repo's own project files (config, issues, templates, example lists) copied into a folder:
what tests, benchmarks and the screenshot script run `newsletter` against."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT_FILES = (
    "newsletter.toml",
    "issues",
    "templates",
    "subscribers.example.csv",
    "staging.example.csv",
)


def copy_project(root: Path) -> Path:
    """Copy the project files into `root` (made if missing); returns `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name)
        else:
            shutil.copy2(source, root / name)
    return root


def publish_all(root: Path) -> None:
    """`[serve] publish = "all"` in the project copy at `root`, for a test of the archive's pages:
    the shipped issues were never sent, and the default ("sent") keeps unsent issues off the
    site (issue 29)."""
    config = root / "newsletter.toml"
    text = config.read_text(encoding="utf-8")
    assert 'publish = "sent"' in text, "the shipped config no longer names [serve] publish"
    config.write_text(text.replace('publish = "sent"', 'publish = "all"'), encoding="utf-8")
