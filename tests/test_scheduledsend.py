"""The worker's send process (scheduledsend.py) as the worker starts it: a SIGTERM while the
checks run is a stop (exit code 4, `stopped:`), which the worker hands back for the next one,
not a death by signal that leaves the schedule `stopped` for the editor to resume; and the
lines the worker's log kept when it ran `newsletter send` (skipped rows, progress) are there."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path
from typing import cast

import pytest

from newsletter.checks.spamscore import SpamUnavailable
from newsletter.draft import Draft
from newsletter.gate import SendVerdict
from newsletter.models import DeliveryStatus
from newsletter.preflight.run import OnlineReport
from newsletter.send.job import Event
from newsletter.send.pipeline import EXIT_STOPPED
from newsletter.send.preparation import Prepared
from newsletter.worker import scheduledsend
from support.sendcli import HANG, environment, finish, write_list
from support.smtp import FaultyHandler, start

# A SpamAssassin that says it started, then takes as long as a loaded one can.
SLOW_SPAMASSASSIN = """#!/bin/sh
touch "{marker}"
exec sleep 120
"""


@pytest.mark.slow
async def test_sigterm_during_the_checks_is_a_stop_the_worker_hands_back(
    project: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    marker = tmp_path / "spamassassin-started"
    program = folder / "spamassassin"
    program.write_text(SLOW_SPAMASSASSIN.format(marker=marker))
    program.chmod(0o755)
    env = environment(9, PATH=f"{folder}{os.pathsep}{os.environ['PATH']}")
    command = scheduledsend.command(None, 14, "main", [])
    proc = await asyncio.create_subprocess_exec(
        *command,
        cwd=project,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    give_up = time.monotonic() + HANG
    while not marker.exists():  # the checks reached SpamAssassin
        assert proc.returncode is None, await proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < give_up, "the checks never started SpamAssassin"
        await asyncio.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    done = await finish(proc)
    assert done.code == EXIT_STOPPED, (done.code, done.out, done.err)
    assert "stopped: stopped by SIGTERM before sending" in done.out
    assert "Traceback" not in done.err


@pytest.mark.slow
async def test_the_list_s_skipped_rows_are_in_the_worker_s_log(project: Path) -> None:
    # `newsletter send` named them when the worker ran it; the worker's log keeps them still.
    write_list(project / "big.csv", 3, extra=["not-an-address"])
    async with start(FaultyHandler()) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv")
        proc = await asyncio.create_subprocess_exec(
            *scheduledsend.command(None, 14, "main", []),
            cwd=project,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        done = await finish(proc)
    assert done.code == 0, (done.out, done.err)
    (skipped,) = [line for line in done.out.splitlines() if line.startswith("skipped row:")]
    assert "not-an-address" in skipped


def test_the_run_s_progress_is_in_the_worker_s_log(capsys: pytest.CaptureFixture[str]) -> None:
    # `newsletter send` off a terminal printed it every 5 s, and the worker's log kept it: a
    # long scheduled send is not silent until its summary. (every=0: each event, not 5 s.)
    lines = scheduledsend.Lines("issue 14 -> main", every=0.0)
    counts = {DeliveryStatus.SENT: 1, DeliveryStatus.PENDING: 2}
    with lines.running(cast(Prepared, None)) as progress:
        progress(Event("reader@example.com", DeliveryStatus.SENT, None, counts))
    (line,) = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"issue 14 -> main: 1/3 done, sent 1 deferred 0 rejected 0, \d+ msg/s", line
    ), line


def test_online_checks_that_could_not_run_are_said_in_the_worker_s_log(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `[check] online` on and the network down: the send goes on, and says it was not checked
    # online, as `newsletter send` did in the worker's log.
    verdict = SendVerdict(
        number=14,
        list_name="main",
        subject="Weekly",
        html_size=1000,
        html_encoding="quoted-printable",
        spam=SpamUnavailable("not installed"),
        findings=(),
        silenced=0,
        silences=(),
        online=OnlineReport(skipped="the network is unreachable"),
        ephemeral_key=False,
        fingerprint="f",
        draft=cast(Draft, None),
    )
    scheduledsend.Lines("issue 14 -> main").checked(verdict)
    assert capsys.readouterr().out.splitlines() == [
        "online checks skipped: the network is unreachable",
        "check: issue 14: 0 error(s), 0 warning(s)",
    ]
