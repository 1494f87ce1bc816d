"""A send with [smtp] at the capture server's address and no capture server running (issue
41): what a newcomer meets when the first test send comes before `newsletter mailbox`. The hint
says to start it, not to check a password there is none of; a relay elsewhere keeps the
password hint. The real command, a port held bound (never listening) so that nothing answers."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.sendcli import environment, newsletter

# 127.0.0.2 is loopback too: the capture server's port there is free of other tests' servers.
HOST = "127.0.0.2"
CAPTURE_PORT = 1025


@contextmanager
def held(host: str, port: int) -> Iterator[None]:
    """`host`:`port` bound and never listening: a connection there is refused."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:  # another program's: it might answer
                pytest.skip(f"{host}:{port} is in use on this machine")
            raise
        yield


@pytest.mark.slow
async def test_no_capture_server_running_says_to_start_newsletter_mailbox(project: Path) -> None:
    with held(HOST, CAPTURE_PORT):
        env = environment(CAPTURE_PORT, NEWSLETTER_SMTP__HOST=HOST)
        done = await newsletter(["send", "--issue", "14", "--list", "staging"], env, project)
    assert done.code == 1, done.out + done.err
    assert f"error: {HOST}:{CAPTURE_PORT} (none): cannot connect" in done.err
    assert (
        f"hint: {HOST}:{CAPTURE_PORT} is the capture server's address, and it is not running:"
        " start it with `newsletter mailbox` (in another terminal), then re-run."
    ) in done.err
    assert "NEWSLETTER_SMTP_PASSWORD" not in done.err
    assert "Traceback" not in done.err


@pytest.mark.slow
async def test_another_relay_that_does_not_answer_keeps_the_smtp_hint(project: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        done = await newsletter(
            ["send", "--issue", "14", "--list", "staging"], environment(port), project
        )
    assert done.code == 1, done.out + done.err
    assert "hint: Check [smtp] in newsletter.toml and NEWSLETTER_SMTP_PASSWORD" in done.err
    assert "newsletter mailbox" not in done.err
