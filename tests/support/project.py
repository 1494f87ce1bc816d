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
