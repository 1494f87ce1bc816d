"""An issue edited after it went to a real list (issue 41, "the editor's day after the first
send"): the send records what readers got (the delivery log's sent_issues), so `check` and
`send` say the file is no longer what readers have, and `diff` compares the file with that
record, with no git at all (this project is not a repository)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from newsletter.database import Database
from support.sendcli import environment, newsletter
from support.smtp import FaultyHandler, start

TITLE = "title: AI系统内容推荐第14期"
EDITED = "title: AI系统内容推荐第14期（修订）"
SAID = "issue 14 went to main on {day}; readers have that text; the archive will show this one"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.mark.slow
async def test_an_issue_edited_after_its_send_is_named_by_check_send_and_diff(
    project: Path,
) -> None:
    issue = project / "issues" / "14.yaml"
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port)
        sent = await newsletter(["send", "--issue", "14", "--yes"], env, project)
        assert sent.code == 0, sent.err
        readers = len(handler.received)
        unchanged = await newsletter(["check", "--issue", "14"], env, project)
        edit(issue, TITLE, EDITED)
        edited = await newsletter(["check", "--issue", "14"], env, project)
        again = await newsletter(["send", "--issue", "14", "--yes"], env, project)
        compared = await newsletter(["diff", "--issue", "14"], env, project)
        named = await newsletter(["diff", "--issue", "14", "sent"], env, project)
    day = dt.datetime.now(dt.UTC).astimezone().date()  # the project's zone: today, one way or other
    days = {(day + dt.timedelta(days=d)).isoformat() for d in (-1, 0, 1)}
    said = [SAID.format(day=d) for d in days]
    assert not any(s in unchanged.out + unchanged.err for s in said), unchanged.out
    assert any(s in edited.out + edited.err for s in said), edited.out + edited.err
    assert edited.code == 0  # a warning: fixing a typo for the archive is the editor's right
    assert any(s in again.out + again.err for s in said), again.out + again.err
    assert len(handler.received) == readers  # the re-run sent nobody a second copy
    assert compared.code == 0, compared.err
    lines = compared.out.splitlines()
    assert lines[0].startswith("comparing with what readers have: sent to main on "), lines[0]
    assert any(line.startswith("subject: ") and "（修订）" in line for line in lines), lines
    assert any(line.startswith("+") and "（修订）" in line for line in lines), lines
    assert named.code == 0, named.err
    assert named.out.splitlines() == lines[1:]  # `sent` named: the same comparison
    assert "Traceback" not in compared.err + named.err


@pytest.mark.slow
async def test_diff_against_sent_before_any_send_is_one_line(project: Path) -> None:
    async with start(FaultyHandler()) as server:
        done = await newsletter(
            ["diff", "--issue", "14", "sent"], environment(server.port), project
        )
    assert done.code == 1
    assert "issue 14 has not gone to a real list" in done.err
    assert "newsletter diff --issue 14 HEAD" in done.err
    assert "Traceback" not in done.err


def test_the_first_send_of_an_issue_is_what_stays_recorded(database: Database) -> None:
    """A re-run after an edit sends the rest the new text, but the first readers keep theirs:
    the record is the first send's, on SQLite and PostgreSQL alike."""
    first = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
    assert database.sent_issues.record(14, "main", "a" * 64, {"subject": "第14期"}, now=first)
    assert not database.sent_issues.record(14, "main", "b" * 64, {"subject": "edited"})
    assert database.sent_issues.record(14, "other", "c" * 64, {"subject": "第14期"})
    kept = database.sent_issues.of(14)
    assert [(s.list_name, s.fingerprint[0], s.version["subject"]) for s in kept] == [
        ("main", "a", "第14期"),
        ("other", "c", "第14期"),
    ]
    assert kept[0].sent_at == first
    assert database.sent_issues.of(15) == []
