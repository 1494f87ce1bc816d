"""The repo's own project files (config, issues, templates, example lists) copied into a folder:
what tests, benchmarks and the screenshot script run `newsletter` against."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from newsletter.checks.spamscore import CACHE_FILE
from newsletter.state.statefiles import private_folder, write_private

REPO = Path(__file__).resolve().parents[2]
PROJECT_FILES = (
    "newsletter.toml",
    "issues",
    "templates",
    "subscribers.example.csv",
    "staging.example.csv",
)


# SpamAssassin's scores so far in this test process, as its cache file keeps them: a `newsletter`
# process a test starts (support.sendcli.spawn) in a project with no state folder yet gets them,
# as a project does after its first `check`, so the real SpamAssassin (Perl's start-up, ~0.8 s)
# runs once per message in a test process, not once per test. The project fixture turns this off
# for a test of SpamAssassin itself (marked `spamassassin`), and a test that makes the state
# folder itself (a full disk, a file in its place) is left alone.
_SCORES: dict[str, list[object]] = {}
_seeding = [True]


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


def seed_scores(root: Path) -> None:
    """Give the project at `root` the spam scores found so far, if it has no state folder yet
    (and seeding is on: `seed_scores_from_now`)."""
    state = root / ".newsletter"
    if not _seeding[0] or not _SCORES or state.exists() or not (root / "newsletter.toml").exists():
        return
    private_folder(state)
    write_private(state / CACHE_FILE, json.dumps({"version": 1, "entries": _SCORES}))


def seed_scores_from_now(enabled: bool) -> None:
    """Seeding on or off for the tests that follow (off in a test of SpamAssassin)."""
    _seeding[0] = enabled


def keep_scores(root: Path) -> None:
    """Keep the spam scores a test's sends found in the project at `root` for later copies."""
    try:
        found = json.loads((root / ".newsletter" / CACHE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    entries = found.get("entries") if isinstance(found, dict) else None
    if isinstance(entries, dict):
        _SCORES.update(entries)


def publish_all(root: Path) -> None:
    """`[serve] publish = "all"` in the project copy at `root`, for a test of the archive's pages:
    the shipped issues were never sent, and the default ("sent") keeps unsent issues off the
    site (issue 29)."""
    config = root / "newsletter.toml"
    text = config.read_text(encoding="utf-8")
    assert 'publish = "sent"' in text, "the shipped config no longer names [serve] publish"
    config.write_text(text.replace('publish = "sent"', 'publish = "all"'), encoding="utf-8")
