"""`newsletter send` runs `check` first (issue 21.1): real subprocess runs, real SMTP, and the
library call a scheduled send makes (gate.inspect_send)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from newsletter.config.settings import load_settings
from newsletter.context import CommandContext
from newsletter.gate import inspect_send
from support.sendcli import environment, newsletter
from support.smtp import FaultyHandler, start

# An issue whose unsafe link `check` calls an error (it would go nowhere for readers).
BROKEN = """---
number: 15
title: Weekly 15
---
Intro text.

## News

### [An item](https://example.org/a)

Some text.

[a script](javascript:alert(1))
"""


def write_broken(project: Path) -> None:
    (project / "issues" / "15.md").write_text(BROKEN, encoding="utf-8")


@pytest.mark.slow
async def test_a_send_with_a_check_error_is_refused_naming_it(project: Path) -> None:
    write_broken(project)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port)
        main = await newsletter(["send", "--issue", "15", "--yes"], env, project)
        staging = await newsletter(["send", "--issue", "15", "--list", "staging"], env, project)
        status = await newsletter(["status", "--issue", "15"], env, project)
    for done in (main, staging):
        assert done.code == 1, done.err
        assert "issues/15.md:13: the link to" in done.err
        assert "[link]" in done.err
        assert "refusing to send issue 15" in done.err
        assert "nothing was planned or sent" in done.err
        assert "--force" in done.err
        assert "Traceback" not in done.err
    assert handler.received == []
    assert handler.connections == 0  # refused before the server was even asked
    assert "nothing sent yet" in status.out


@pytest.mark.slow
async def test_force_sends_despite_the_error_and_says_so(project: Path) -> None:
    write_broken(project)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port)
        done = await newsletter(
            ["send", "--issue", "15", "--list", "staging", "--force"], env, project
        )
    assert done.code == 0, done.err
    assert "issues/15.md:13: the link to" in done.err
    assert "--force: sending issue 15 despite 1 error(s)" in done.err
    assert len(handler.by_recipient) == 2


@pytest.mark.slow
async def test_warnings_are_shown_and_do_not_stop_a_send(project: Path) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        done = await newsletter(
            ["send", "--issue", "14", "--yes"], environment(server.port), project
        )
    assert done.code == 0, done.err
    # Issue 14's one warning, kept on purpose (README): the same paper under two items.
    assert "[duplicate-url]" in done.out
    assert "check: issue 14: 0 error(s), 2 warning(s)" in done.out
    assert "[duplicate-url]" not in done.err  # stderr is for what went wrong
    assert len(handler.by_recipient) == 5


@pytest.mark.slow
async def test_a_tracking_pixel_is_a_warning_of_the_send(project: Path) -> None:
    path = project / "issues" / "14.yaml"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[11:11] = ["", "", "          ![一像素](https://t.example.org/o.gif){width=1 height=1}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    handler = FaultyHandler()
    async with start(handler) as server:
        done = await newsletter(
            ["send", "--issue", "14", "--yes"], environment(server.port), project
        )
    assert done.code == 0, done.err
    assert "warning: issues/14.yaml:14: https://t.example.org/o.gif is a 1×1 image" in done.out
    assert "[tracking-pixel]" in done.out
    assert "check: issue 14: 0 error(s), 3 warning(s)" in done.out


def _confirm(project: Path, env: dict[str, str], answer: bytes) -> tuple[int, str]:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "newsletter", "send", "--issue", "14"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=project,
    )
    os.close(slave)
    assert proc.stdout is not None
    shown = b""
    deadline = time.monotonic() + 60
    while b"Send now?" not in shown:
        assert time.monotonic() < deadline, shown
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            shown += os.read(proc.stdout.fileno(), 4096)
    os.write(master, answer)
    out, err = proc.communicate(timeout=60)
    os.close(master)
    return proc.returncode, (shown + out).decode() + err.decode()


@pytest.mark.slow
def test_the_confirmation_shows_subject_size_spam_score_and_checks(project: Path) -> None:
    env = environment(9)  # the question comes before any connection
    code, text = _confirm(project, env, b"n\n")
    assert code == 1, text
    assert "About to send issue 14 to the 'main' list:" in text
    assert "  subject     AI系统内容推荐第14期\n" in text
    assert "  recipients  5\n" in text
    assert "  HTML part   " in text
    assert "% of Gmail's ~102 KB clip" in text
    assert "  spam        spam score 0.0 (SpamAssassin" in text
    assert "  checks      0 error(s), 2 warning(s) (shown above)" in text
    assert "[duplicate-url]" in text
    # Where every link of the message points, for good once sent (issue 41).
    assert "  base_url    https://news.example.org (every unsubscribe and archive link)\n" in text
    assert "Nothing sent." in text


@pytest.mark.slow
def test_the_confirmation_names_the_rejected_rows_before_it_asks(project: Path) -> None:
    # issue 29: the bad rows were only reported after "yes", once the send had gone out.
    csv = project / "subscribers.example.csv"
    bad = [f"typo{n}@@example.com,Typo {n},subscribed," for n in range(5)]
    csv.write_text(csv.read_text(encoding="utf-8") + "\n".join(bad) + "\n", encoding="utf-8")
    code, text = _confirm(project, environment(9), b"n\n")
    assert code == 1, text
    before, _, _ = text.partition("Send now?")
    assert "  recipients  5\n" in before
    # The example list's own two bad rows (a duplicate, a broken address) and these five.
    assert "  rejected    7 row(s) of subscribers.example.csv get nothing:\n" in before
    assert "    subscribers.example.csv:8: email: 'ALICE@EXAMPLE.NET' duplicates line 4" in before
    assert "    subscribers.example.csv:9: email: 'not-an-address' is not a valid address" in before
    assert "    subscribers.example.csv:12: email: 'typo2@@example.com' is not a valid" in before
    assert "subscribers.example.csv:13:" not in before  # the first five, then a count
    assert "    ... and 2 more (`newsletter subscribers --list main`)\n" in before
    assert "Nothing sent." in text


@pytest.mark.slow
def test_without_spamassassin_the_confirmation_says_so_in_one_line(
    project: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = environment(9, PATH=str(empty))  # python is started by its full path
    code, text = _confirm(project, env, b"n\n")
    assert code == 1, text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("  spam ")]
    assert "spam score not measured: `spamassassin` is not installed" in line
    assert "Traceback" not in text


@pytest.mark.slow
async def test_again_on_a_real_list_and_flags_with_dry_run_are_clear_errors(
    project: Path,
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port)
        again = await newsletter(["send", "--issue", "14", "--again", "--yes"], env, project)
        dry = await newsletter(
            ["send", "--issue", "14", "--list", "staging", "--again", "--dry-run"], env, project
        )
        unknown = await newsletter(["send", "--issue", "14", "--list", "nope"], env, project)
    assert again.code == 2
    assert "--again repeats a test send; 'main' is not a staging list" in again.err
    assert dry.code == 2
    assert "not --dry-run" in dry.err
    assert unknown.code == 1
    assert "nope" in unknown.err
    for done in (again, dry, unknown):
        assert "Traceback" not in done.err
    assert handler.received == []


@pytest.mark.slow
def test_inspect_send_is_a_value_a_scheduler_can_call(project: Path) -> None:
    write_broken(project)
    settings = load_settings(project / "newsletter.toml", environ={})
    with CommandContext(settings) as context:
        broken = inspect_send(context, 15, "main", online=False)
        assert not broken.passed
        assert [f.code for f in broken.errors] == ["link"]
        fine = inspect_send(context, 14, "main", online=False)
        assert fine.passed
        assert [f.code for f in fine.warnings] == [
            "duplicate-url",
            "list",
        ]  # the example list's bad rows
        assert fine.subject == "AI系统内容推荐第14期"
        assert fine.online is None
        # The staging list's message has its test marker in the subject: another fingerprint.
        staging = inspect_send(context, 14, "staging", online=False)
        assert staging.fingerprint != fine.fingerprint
        assert inspect_send(context, 14, "main", online=False).fingerprint == fine.fingerprint
