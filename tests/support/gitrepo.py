"""git run in a test's repository, as one editor (the tests' commits need an author)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_PERSON = {
    "GIT_AUTHOR_NAME": "Editor",
    "GIT_AUTHOR_EMAIL": "editor@example.org",
    "GIT_COMMITTER_NAME": "Editor",
    "GIT_COMMITTER_EMAIL": "editor@example.org",
}


def git(cwd: Path, *args: str) -> str:
    """`git ARGS` in `cwd`: its output; a failure fails the test."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_PERSON},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout
