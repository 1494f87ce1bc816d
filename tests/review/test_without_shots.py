"""`diff` and `shots` without the screenshot libraries or a Chromium (issue 33, point 2): diff
still prints everything but pictures, exit 0, and its last line says exactly how to get them;
`--html` and `shots` refuse in two lines (the error, the hint), writing nothing. The packages are
made unimportable for real in this process (None in sys.modules makes `import` raise
ImportError), so the code's own import is what fails."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.review.shots import SHOTS_HINT
from support.gitrepo import git


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("NEWSLETTER_CHROMIUM", raising=False)
    root = tmp_path / "news"
    assert CliRunner().invoke(cli, ["init", str(root), "--yes"]).exit_code == 0
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    issue = root / "issues" / "1.md"
    issue.write_text(
        issue.read_text(encoding="utf-8").replace("Welcome to", "Greetings from", 1),
        encoding="utf-8",
    )
    return root


def run(root: Path, *args: str, **invoke: Any) -> Any:
    config = str(root / "newsletter.toml")
    return CliRunner().invoke(cli, ["--config", config, *args], **invoke)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "package"), [("playwright.sync_api", "playwright"), ("PIL", "Pillow")]
)
def test_diff_without_a_library_prints_all_but_pictures_and_how_to_get_them(
    repo: Path, monkeypatch: pytest.MonkeyPatch, module: str, package: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError):
        __import__(module)  # what the code meets
    result = run(repo, "diff", "--issue", "1")
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert any(line.startswith("+Greetings from") for line in out), out
    assert "links: 0 changed, 0 added, 0 removed" in out
    assert out[-1] == f"pictures: the {package} package is not installed: {SHOTS_HINT}"
    assert "pip install 'git-newsletter[shots]'" in out[-1]  # a venv's pip, by the dist's name
    # --html asks for what is not there: the error and the hint, nothing written.
    page = repo / "page.html"
    refused = run(repo, "diff", "--issue", "1", "--html", str(page))
    assert refused.exit_code == 1
    assert refused.stderr.splitlines() == [
        f"error: --html needs screenshots: the {package} package is not installed",
        f"hint: {SHOTS_HINT}",
    ]
    assert not page.exists()
    shots = run(repo, "shots", "--issue", "1", "--out", str(repo / "shots"))
    assert shots.exit_code == 1
    assert shots.stderr.splitlines()[0] == (
        f"error: no screenshots: the {package} package is not installed"
    )
    assert not (repo / "shots").exists()


def test_without_a_chromium_where_it_is_configured(repo: Path) -> None:
    missing = str(repo / "no-such-chromium")
    result = run(repo, "diff", "--issue", "1", "--chromium", missing)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == f"pictures: no Chromium at {missing}: {SHOTS_HINT}"
    # NEWSLETTER_CHROMIUM is the same setting.
    shots = run(repo, "shots", "--issue", "1", env={"NEWSLETTER_CHROMIUM": missing})
    assert shots.exit_code == 1
    assert shots.stderr.splitlines() == [
        f"error: no screenshots: no Chromium at {missing}",
        f"hint: {SHOTS_HINT}",
    ]


@pytest.mark.slow
def test_a_chromium_that_does_not_start_is_one_error(repo: Path) -> None:
    not_a_browser = repo / "chromium"
    not_a_browser.write_text("#!/bin/sh\necho 'not a browser' >&2\nexit 3\n", encoding="utf-8")
    not_a_browser.chmod(0o755)
    page = repo / "page.html"
    result = run(
        repo, "diff", "--issue", "1", "--html", str(page), "--chromium", str(not_a_browser)
    )
    assert result.exit_code == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: Chromium ({not_a_browser}) failed: "), first
    assert "Traceback" not in result.output
    assert not page.exists()


def test_an_html_page_in_a_missing_folder_is_refused_before_any_shot(repo: Path) -> None:
    # The shots take a minute on a loaded machine: the page's folder is looked at first.
    starts = repo.parent / "starts.log"
    browser = repo / "chromium"
    browser.write_text(f'#!/bin/sh\necho start >> "{starts}"\nexit 3\n', encoding="utf-8")
    browser.chmod(0o755)
    page = repo / "no-such-folder" / "page.html"
    result = run(repo, "diff", "--issue", "1", "--html", str(page), "--chromium", str(browser))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: --html {page}: the folder {page.parent} does not exist or cannot be written in",
        "hint: Make the folder first, or name a file in a folder you can write in.",
    ]
    assert not starts.exists()
