"""Where signup is, said where a newcomer looks (issue 41): `newsletter init` writes the setting
that opens it (commented, explained), `newsletter serve`'s first lines say where signup is or
that it is off and how to open it, and `serve --local` (the reader flow on this machine) is
refused when its mail, with links to this machine, would reach a real list's readers."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import pytest

from support.newcomer import clean_environment, init_project, open_signup, running_serve

pytestmark = pytest.mark.slow


def test_a_new_project_says_signup_is_off_and_its_commented_line_opens_it(
    tmp_path: Path,
) -> None:
    project = init_project(tmp_path)
    text = (project / "newsletter.toml").read_text(encoding="utf-8")
    assert "signup" not in tomllib.loads(text)["lists"]["main"]  # off until the editor says
    with running_serve(project) as served:
        assert served.lines[0].startswith(f"Serving unsubscribe and archive at {served.url}/")
        assert served.lines[1] == (
            "Signup is off: no list has `signup = true`. To open /signup, set it under"
            " [lists.main] in newsletter.toml and start serve again."
        )
        assert httpx.get(f"{served.url}/signup").status_code == 404

    open_signup(project)
    assert tomllib.loads((project / "newsletter.toml").read_text(encoding="utf-8"))["lists"][
        "main"
    ]["signup"]
    with running_serve(project) as served:
        assert served.lines[1] == (
            "Signup (main) at http://127.0.0.1:8025/signup; `newsletter worker` sends the"
            " confirmations"
        )  # base_url's: where readers find it
        page = httpx.get(f"{served.url}/signup")
        assert page.status_code == 200
        assert 'name="email"' in page.text


def test_serve_local_is_refused_when_a_real_lists_mail_would_leave(tmp_path: Path) -> None:
    project = init_project(
        tmp_path, "--base-url", "https://news.example.org", "--smtp-host", "smtp.example.org"
    )
    open_signup(project)
    done = subprocess.run(
        [sys.executable, "-m", "newsletter", "serve", "--local", "--port", "0"],
        cwd=project,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == (
        "error: serve --local: [lists.main] takes signups and [smtp] host is smtp.example.org:"
        " its confirmations would reach real inboxes with links to this machine"
    )
    assert lines[1].startswith("hint: Try it with the capture server (`newsletter mailbox`")
    assert "Traceback" not in done.stderr
    assert "Serving" not in done.stderr  # refused before it listened


def test_serve_local_on_a_staging_list_names_its_own_address(tmp_path: Path) -> None:
    project = init_project(
        tmp_path, "--base-url", "https://news.example.org", "--smtp-host", "smtp.example.org"
    )
    path = project / "newsletter.toml"
    path.write_text(
        path.read_text(encoding="utf-8").replace(
            "staging = true\n", "staging = true\nsignup = true\n"
        ),
        encoding="utf-8",
    )
    with running_serve(project, "--local") as served:
        assert served.lines[0] == (
            f"Serving the reader flow locally at {served.url}/ (every link and site mail uses"
            " it, not base_url https://news.example.org)"
        )
        assert served.lines[1] == (
            f"Signup (staging) at {served.url}/signup; this process sends the confirmations"
        )
        code, _, err = served.stop()
    assert code == 0, err


def test_serve_local_is_refused_while_a_worker_would_send_its_mail(tmp_path: Path) -> None:
    """A worker running on the project would send the confirmations with base_url's links:
    serve --local, which sends them with its own, takes the worker's lock or stops."""
    project = init_project(tmp_path, "--base-url", "https://news.example.org")
    open_signup(project)
    worker = subprocess.Popen(
        [sys.executable, "-m", "newsletter", "worker"],
        cwd=project,
        env=clean_environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        assert worker.stderr.readline().startswith("Worker started")  # it holds the lock
        done = subprocess.run(
            [sys.executable, "-m", "newsletter", "serve", "--local", "--port", "0"],
            cwd=project,
            env=clean_environment(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        worker.terminate()
        worker.communicate(timeout=30)
    assert done.returncode == 1
    errors = done.stderr.splitlines()
    assert errors[0] == (
        f"error: serve --local: another `newsletter worker` runs on this project (pid {worker.pid})"
    )
    assert errors[1].startswith("hint: Stop it first: serve --local sends the site's mail itself")
    assert "Traceback" not in done.stderr
    assert "Serving" not in done.stderr  # it never said it serves
