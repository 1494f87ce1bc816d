"""`make demo` as README gives it, for real, in a copy of the project: the same loop on every
run in its own state, and a stop with one line when its capture server's port is taken."""

from __future__ import annotations

import importlib.util
import mailbox
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from support.heldport import other_smtp_server
from support.project import REPO, copy_project

VENV = Path(sys.prefix)


def demo_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo", REPO / "tools" / "demo.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The project as a fresh clone has it: its files, the Makefile and the demo script."""
    root = copy_project(tmp_path / "clone")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(REPO / name, root / name)  # the mtime kept: make sees the venv up to date
    shutil.copytree(REPO / "tools", root / "tools")
    return root


def make_demo(root: Path, port: int, **environ: str) -> subprocess.CompletedProcess[str]:
    """`make demo DEMO_PORT=port` with this test's venv (`-o`: never reinstalled into)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NEWSLETTER_", "MAKE")) and k != "MFLAGS"
    }
    env.update(environ)
    return subprocess.run(
        [
            *("make", "--no-print-directory", "-o", str(VENV / ".installed"), "demo"),
            *(f"VENV={VENV}", f"DEMO_PORT={port}"),
        ],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def the_loop(output: str) -> list[str]:
    """The run's lines with what differs from run to run (clock, port, speed, and the size of the
    bounce, whose Message-ID holds a pid and a random number) taken out, sorted: the capture
    server's lines interleave with the send's as they come."""
    output = re.sub(r"\d\d:\d\d:\d\d(\.\d+)?", "TIME", output)
    output = re.sub(r"\d{4}-\d\d-\d\dT\S+", "STAMP", output)
    # `status` names each test send's minute ("test 1    at 10:42"): two runs may straddle one.
    output = re.sub(r" at (\d{4}-\d\d-\d\d )?\d\d:\d\d\b", " at TIME", output)
    output = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", output)
    output = re.sub(r"--port \d+", "--port PORT", output)
    output = re.sub(r"in \d+\.\d s, \d+ msg/s", "in S, R msg/s", output)
    output = re.sub(r"in \d+\.\d s", "in S", output)
    output = re.sub(r"\d+ bytes  'Undelivered", "SIZE bytes  'Undelivered", output)
    return sorted(output.splitlines())


@pytest.mark.slow
def test_the_demo_shows_the_same_loop_every_time_and_leaves_the_project_alone(
    clone: Path,
) -> None:
    # Settings a user may have exported for their own sends: the demo must not use them.
    exported = {
        "NEWSLETTER_OUTBOX__URL": "sqlite:///.newsletter/outbox.sqlite3",
        "NEWSLETTER_PATHS__STATE": ".newsletter",
        "NEWSLETTER_SMTP__PORT": "1",
        "NEWSLETTER_BOUNCES__RETURN_PATH": "",
    }
    runs = [make_demo(clone, 0, **exported) for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stdout + done.stderr
        out = done.stdout
        assert "issue 14 -> staging: 2 sent (2 sent by this run" in out
        # VERP: each message's envelope sender is bounces+TAG@, and the bounce comes back to it.
        assert re.search(r" bounces\+\w+-\w+@news\.example\.org -> proofreader@", out)
        assert re.search(r"hard +proofreader@news\.example\.org issue 14 list staging 5\.1\.1", out)
        assert "1 hard, 2 not understood; 1 address(es) suppressed" in out
        assert re.search(r"staging  proofreader@news\.example\.org  bounced", out)
        assert "  bounced   1 (50.0% of 2 answered)" in out
        assert "Mailbox stopped." in out
        # issue 29: the demo's end says how to type `newsletter` (it is in the venv, not on
        # PATH) and how to set a secret of one's own (a send without one stops).
        assert out.splitlines()[-3:] == [
            '--- your turn (README, "The editor\'s day"): in this shell, first',
            f"$ . {VENV / 'bin' / 'activate'}   # puts `newsletter` on PATH",
            "$ export NEWSLETTER_SECRET=\"$(python3 -c 'import secrets;"
            " print(secrets.token_urlsafe(32))')\"   # yours, kept for every send",
        ]
        assert "was not unsubscribed" not in out + done.stderr
        assert "Traceback" not in done.stderr
    assert the_loop(runs[1].stdout) == the_loop(runs[0].stdout)
    assert the_loop(runs[1].stderr) == the_loop(runs[0].stderr)
    assert not (clone / ".newsletter").exists()
    state = clone / "out" / "demo" / "state"
    # This run's two test messages and no more (the bounce was filed away once processed).
    assert len(mailbox.Maildir(state / "mailbox", create=False)) == 2
    assert (state / "outbox.sqlite3").is_file()
    assert (clone / "out" / "demo" / "14" / "email.eml").is_file()


@pytest.mark.slow
def test_the_demo_stops_with_one_line_when_its_port_is_taken(clone: Path) -> None:
    with other_smtp_server() as other:
        done = make_demo(clone, other.port)
        connections = other.connections
    assert done.returncode != 0
    ours = [line for line in done.stderr.splitlines() if not line.startswith("make: ***")]
    assert ours == [
        f"error: port {other.port} on 127.0.0.1 is busy (another program listens there):"
        " choose another port, e.g. make demo DEMO_PORT=2525 (0 picks a free one)"
    ]
    assert done.stdout == ""  # it stopped before checking, building or sending anything
    assert other.envelopes == []
    assert connections == 0  # never as much as connected to the other server
    assert not (clone / "out" / "demo" / "14").exists()
    assert not (clone / ".newsletter").exists()


def test_the_demo_keeps_only_the_secret_of_the_shell_s_newsletter_settings(tmp_path: Path) -> None:
    demo = demo_module()
    shell = {
        "PATH": "/bin",
        "NEWSLETTER_SECRET": "my-own-secret-0123456789",
        "NEWSLETTER_SMTP__HOST": "smtp.example.org",
        "NEWSLETTER_SMTP_PASSWORD": "hunter2",
        "NEWSLETTER_LISTS__STAGING__PATH": "real-staging.csv",
    }
    env = demo.demo_environment(shell, tmp_path / "state")
    assert env["PATH"] == "/bin"
    assert env["NEWSLETTER_SECRET"] == "my-own-secret-0123456789"
    assert "NEWSLETTER_SMTP__HOST" not in env
    assert "NEWSLETTER_SMTP_PASSWORD" not in env
    assert "NEWSLETTER_LISTS__STAGING__PATH" not in env
    assert env["NEWSLETTER_PATHS__STATE"] == str(tmp_path / "state")
    assert env["NEWSLETTER_OUTBOX__URL"] == f"sqlite:///{tmp_path / 'state' / 'outbox.sqlite3'}"
    assert env["NEWSLETTER_BOUNCES__RETURN_PATH"] == "bounces@news.example.org"
    # An empty one is no secret: the demo's publicly known key signs instead.
    empty = demo.demo_environment({"NEWSLETTER_SECRET": ""}, tmp_path)
    assert empty["NEWSLETTER_SECRET"] == demo.DEMO_SECRET
