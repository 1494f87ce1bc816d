"""`newsletter mailbox` when it cannot listen: one clear line, exit 1, nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.heldport import other_smtp_server


def mailbox(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEWSLETTER_")}
    return subprocess.run(
        [sys.executable, "-m", "newsletter", "mailbox", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_port_another_smtp_server_holds_is_one_line_and_exit_1(project: Path) -> None:
    with other_smtp_server() as other:
        done = mailbox(["--port", str(other.port)], project)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == (
        f"error: cannot listen on 127.0.0.1:{other.port}: the port is busy: another program"
        " listens there"
    )
    assert lines[1].startswith("hint: Stop the program that holds the port, or pass another")
    assert "--port (0 picks a free one" in lines[1]
    assert len(lines) == 2
    assert done.stdout == ""  # no "Capturing mail on ..." line: nobody may think it listens
    assert not (project / ".newsletter").exists()  # no Maildir made for a server that never ran
    assert other.envelopes == []


@pytest.mark.slow
def test_an_address_this_machine_lacks_is_named(project: Path) -> None:
    # 192.0.2.0/24 is TEST-NET-1: on no machine; binding to it sends nothing anywhere.
    done = mailbox(["--host", "192.0.2.1", "--port", "0"], project)
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (
        "error: cannot listen on 192.0.2.1:0: this machine has no such address"
    )
    assert "Traceback" not in done.stderr
