"""A built wheel carries the default templates, so `pip install` users get a working newsletter;
installed into a fresh venv (as `pipx install` or `uv tool install` do), it starts a project and
renders it from a folder outside the repo (issue 32, point 1)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]


def build_wheel(folder: Path) -> Path:
    """The wheel, built offline from the checkout (no build isolation: hatchling is here)."""
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
            str(folder),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = folder.glob("git_newsletter-*.whl")
    return wheel


@pytest.mark.slow
def test_wheel_ships_templates_and_console_script(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
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
    assert "newsletter/review/templates/diff.html" in names  # diff --html's page
    for name in ("static/preview.js", "static/preview.css", "templates/issue.html"):
        assert f"newsletter/web/preview/{name}" in names  # the preview's pages
    for name in ("newsletter.toml", "issue.en.md", "issue.zh.md", "gitignore", "README.md"):
        assert (
            f"newsletter/setup/project_templates/{name}" in names
        )  # what `newsletter init` writes
    assert "newsletter/setup/project_templates/workflow.yml" in names  # the workflow init writes
    assert "newsletter/py.typed" in names  # the library's types reach a caller's mypy
    assert "newsletter = newsletter.cli.main:main" in scripts


@contextlib.contextmanager
def running(command: list[str], cwd: Path, env: dict[str, str]) -> Iterator[str]:
    """A server command (`--port 0`) as a process; yields the URL its first line names."""
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert process.stdout is not None
        lines, found = [], None
        for line in process.stdout:  # ends if the process dies: a hang is bounded by it
            lines.append(line)
            found = re.search(r"(http://127\.0\.0\.1:\d+)", line)
            if found:
                break
        assert found, "".join(lines)
        yield found.group(1)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def get(url: str) -> httpx.Response:
    """GET `url` once the server answers (it prints its address just before it listens)."""
    for _ in range(200):
        try:
            return httpx.get(url, timeout=30)
        except httpx.ConnectError:
            time.sleep(0.05)
    return httpx.get(url, timeout=30)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def text_of(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


@pytest.mark.slow
def test_the_installed_wheel_starts_and_renders_a_project_outside_the_repo(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "dist")
    venv = tmp_path / "tool"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The dependencies come from this environment's site-packages through a .pth: the test has
    # no network. A .pth in that folder is not read from there, so the editable install's
    # path to the repo's src/ stays off sys.path: only the wheel's copy can be imported.
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "dependencies.pth").write_text(
        sysconfig.get_path("purelib") + "\n", encoding="utf-8"
    )
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    installed = subprocess.run(
        [*pip, "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWSLETTER_", "PYTHON"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"

    def run(*args: str, cwd: Path = work) -> str:
        done = subprocess.run(
            list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
        return done.stdout

    where = json.loads(
        run(
            str(python),
            "-c",
            "import json, sys, newsletter; print(json.dumps([newsletter.__file__, sys.path]))",
        )
    )
    assert Path(where[0]).is_relative_to(venv), where[0]
    assert str(REPO / "src") not in where[1]
    assert run("newsletter", "--version").strip() == "newsletter, version 0.1.0"
    run("newsletter", "init", "mynews", "--yes")
    project = work / "mynews"
    run("newsletter", "build", "--issue", "1", "--out", "out", cwd=project)
    html = (project / "out" / "email.html").read_text(encoding="utf-8")
    assert "Welcome to the first issue of My Newsletter." in text_of(html)
    text = (project / "out" / "email.txt").read_text(encoding="utf-8")
    assert text.startswith("My Newsletter 1\n")
    # The web archive: the site's page templates, from the package.
    run("newsletter", "build", "--site", "site", cwd=project)
    assert "My Newsletter" in text_of((project / "site" / "index.html").read_text("utf-8"))
    # The servers' pages and static files, from the package; serve signs with the file's secret.
    env["PYTHONUNBUFFERED"] = "1"
    with running(["newsletter", "serve", "--port", "0"], project, env) as site:
        page = get(f"{site}/unsubscribe")
        assert page.status_code == 200
        assert "My Newsletter" in text_of(page.text)
    preview_command = ["newsletter", "preview", "--issue", "1", "--port", "0", "--no-open"]
    with running(preview_command, project, env) as preview:
        page = get(f"{preview}/issues/1")
        assert page.status_code == 200
        assert "My Newsletter 1" in text_of(page.text)
        assert get(f"{preview}/static/preview.js").status_code == 200


@pytest.mark.slow
def test_a_pipx_install_is_told_to_pipx_inject_the_shots_extra(tmp_path: Path) -> None:
    """pipx keeps the tool in its own venv, where `pip install` never reaches: the hint a
    pipx install prints is the `pipx inject` that adds the extra (issue 41). A real pipx
    install of the wheel (its dependencies from the package index, through pip's cache)."""
    wheel = build_wheel(tmp_path / "dist")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWSLETTER_", "PYTHON"))}
    env |= {"PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "bin")}
    pipx = Path(sys.executable).parent / "pipx"
    done = subprocess.run(
        [pipx, "install", str(wheel)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    newsletter = tmp_path / "bin" / "newsletter"  # the command, from the git-newsletter wheel
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}"
    subprocess.run([newsletter, "init", str(tmp_path / "news"), "--yes"], env=env, check=True)
    shots = subprocess.run(
        [newsletter, "shots", "--issue", "1"],
        cwd=tmp_path / "news",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shots.returncode == 1
    hint = shots.stderr.splitlines()[-1]
    # The extra's own requirements (from the wheel's metadata), by the distribution's name.
    assert hint.startswith("hint: pipx inject git-newsletter 'pillow>=10' 'playwright>=1.48' "), (
        shots.stderr
    )
