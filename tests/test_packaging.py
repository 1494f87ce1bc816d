"""A built wheel carries the default templates, so `pip install` users get a working newsletter."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_ships_templates_and_console_script(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("newsletter-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        scripts = archive.read(entry_points).decode()
    for name in ("issue.mjml", "content.mjml", "issue.txt", "content.txt", "inline.css"):
        assert f"newsletter/default_templates/email/{name}" in names
    for kind in ("site", "confirm", "welcome", "change"):  # the site's own mail
        for part in ("mjml", "txt"):
            assert f"newsletter/default_templates/email/{kind}.{part}" in names
    for name in ("static/proof-of-work.js", "static/confirm.js", "templates/signup.html"):
        assert f"newsletter/web/site/{name}" in names  # the signup's scripts and pages
    assert "newsletter/clicks/templates/report.html" in names  # the click report's page
    assert "newsletter = newsletter.cli.main:main" in scripts
