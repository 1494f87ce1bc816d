"""SpamAssassin started before its message exists (spamscore.Scoring, gate.inspect_send): a fake
`spamassassin` that notes each start and each message it scores, and always scores 6.0."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from pathlib import Path

import pytest

from newsletter import CheckFailedError, Project
from newsletter.checks.spamscore import SPAM_ERROR, Scoring, SpamScore
from support.sendcli import HANG, environment
from support.smtp import FaultyHandler, start

pytestmark = pytest.mark.spamassassin  # its projects start with no kept scores

REPORT = """\
Content analysis details:   (6.0 points, 5.0 required)

 pts rule name              description
---- ---------------------- --------------------------------------------------
 6.0 FAKE_SPAM              A rule of the test's fake spamassassin
"""
MESSAGE = b"Subject: x\r\n\r\nbody\r\n"


def fake_spamassassin(folder: Path) -> Path:
    """`folder/spamassassin`: appends its pid to started.log, reads the message, then appends
    its size to scored.log and prints a report of 6.0 points."""
    folder.mkdir(exist_ok=True)
    program = folder / "spamassassin"
    program.write_text(
        "#!/bin/sh\n"
        f'echo $$ >> "{folder}/started.log"\n'
        "size=$(wc -c)\n"
        f'echo "$size" >> "{folder}/scored.log"\n'
        f"cat <<'EOF'\n{REPORT}EOF\n",
        encoding="utf-8",
    )
    program.chmod(0o755)
    return program


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def wait_for_start(folder: Path, count: int) -> list[str]:
    """The pids of the fake's first `count` starts, once that many have started."""
    deadline = time.monotonic() + HANG  # a hang guard, not a bound: the wait ends on the file
    while len(lines(folder / "started.log")) < count:
        assert time.monotonic() < deadline, "the fake spamassassin never started"
        time.sleep(0.01)
    return lines(folder / "started.log")


def test_spamassassin_starts_before_its_message_and_a_kept_score_ends_it(tmp_path: Path) -> None:
    program = fake_spamassassin(tmp_path / "bin")
    with Scoring(program=str(program)) as scoring:
        # Started with no message yet: Perl loads while the issue would render.
        wait_for_start(tmp_path / "bin", 1)
        assert lines(tmp_path / "bin" / "scored.log") == []
        scoring.feed(MESSAGE, "fingerprint-1")
        first = scoring.result()
    assert isinstance(first, SpamScore)
    assert first.score == 6.0
    assert [rule.name for rule in first.scored] == ["FAKE_SPAM"]
    assert lines(tmp_path / "bin" / "scored.log") == [str(len(MESSAGE))]
    # The same message again: the kept score, and the second process ends without scoring.
    with Scoring(program=str(program)) as scoring:
        [_, pid] = wait_for_start(tmp_path / "bin", 2)
        scoring.feed(MESSAGE, "fingerprint-1")
        assert scoring.result() == first
    assert lines(tmp_path / "bin" / "scored.log") == [str(len(MESSAGE))]
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pid), 0)


def test_a_hint_whose_score_is_kept_starts_nothing_and_another_message_still_scores(
    tmp_path: Path,
) -> None:
    # A send after its `check` (the same issue file, list and settings) started Perl only to
    # kill it once the message's score was found kept.
    program = fake_spamassassin(tmp_path / "bin")
    hint = f"{tmp_path}/issues/14.md as it stands"
    with Scoring(program=str(program), hint=hint) as scoring:
        wait_for_start(tmp_path / "bin", 1)  # no score kept for this hint: started ahead
        scoring.feed(MESSAGE, "fingerprint-h")
        first = scoring.result()
    with Scoring(program=str(program), hint=hint) as scoring:
        scoring.feed(MESSAGE, "fingerprint-h")
        assert scoring.result() == first
    assert len(lines(tmp_path / "bin" / "started.log")) == 1  # nothing started
    # The same hint, another message (a template edited since): started when fed, and scored.
    other = MESSAGE + b"edited\r\n"
    with Scoring(program=str(program), hint=hint) as scoring:
        scoring.feed(other, "fingerprint-other")
        second = scoring.result()
    assert isinstance(second, SpamScore)
    assert lines(tmp_path / "bin" / "scored.log") == [str(len(MESSAGE)), str(len(other))]
    # Hinted now at the edited message: its kept score, nothing started.
    with Scoring(program=str(program), hint=hint) as scoring:
        scoring.feed(other, "fingerprint-other")
        assert scoring.result() == second
    assert len(lines(tmp_path / "bin" / "started.log")) == 2


def test_a_process_never_fed_ends_with_the_block(tmp_path: Path) -> None:
    program = fake_spamassassin(tmp_path / "bin")
    pids: list[str] = []

    def fails_to_load() -> None:
        with Scoring(program=str(program)):
            pids.extend(wait_for_start(tmp_path / "bin", 1))
            raise LookupError("the issue did not load")

    with pytest.raises(LookupError, match="did not load"):
        fails_to_load()
    [pid] = pids
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)
    assert lines(tmp_path / "bin" / "scored.log") == []


@pytest.mark.slow
async def test_a_spam_score_started_early_still_refuses_before_anything_is_planned(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = fake_spamassassin(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ['PATH']}")
    handler = FaultyHandler()
    async with start(handler) as server:
        for name in [k for k in os.environ if k.startswith("NEWSLETTER_")]:
            monkeypatch.delenv(name)
        for name, value in environment(server.port).items():
            if name.startswith("NEWSLETTER_"):
                monkeypatch.setenv(name, value)
        api = Project.open()
        with pytest.raises(CheckFailedError, match="nothing was planned or sent"):
            await asyncio.to_thread(api.send, 14)
        verdict = await asyncio.to_thread(api.check, 14)
    assert isinstance(verdict.spam, SpamScore)
    assert verdict.spam.score >= SPAM_ERROR
    assert [f.code for f in verdict.errors] == ["spam-score"]
    assert handler.connections == 0
    assert handler.received == []
    database = project / ".newsletter" / "outbox.sqlite3"
    if database.exists():  # the log may exist (the date of a first send is read), never a row
        with sqlite3.connect(database) as db:
            assert db.execute("SELECT count(*) FROM deliveries").fetchone() == (0,)
    # The message was scored by the send's own start of the program; check kept its score, and
    # knowing it kept (the same issue file, list and settings), did not start the program.
    assert len(lines(tmp_path / "bin" / "scored.log")) == 1
    assert len(lines(tmp_path / "bin" / "started.log")) == 1
