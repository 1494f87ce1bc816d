"""`newsletter bounces` killed with SIGKILL part-way through a mailbox of complaints, then run
again: every complaint applied exactly once (the webhook batch's kill is in
tests/web/site/test_webhook_kills.py). A report's record is its claim ("already counted"
on the next run), so the record and the suppression it leads to must commit together. The
outbox is a SQLite file or the test session's PostgreSQL; the kill waits on rows appearing."""

from __future__ import annotations

import mailbox
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from newsletter.bounces.kinds import Kind
from newsletter.bounces.policy import Policy, Verdict
from newsletter.bounces.reports import Diagnosis, Report
from newsletter.bounces.verp import TAG_HEADER, make_tag
from newsletter.config.settings import BouncesSettings
from newsletter.database import Database, open_database
from newsletter.errors import DatabaseError
from newsletter.models import DeliveryStatus
from newsletter.webhooks.common import Event, apply_events
from support.database import due, plan, record
from support.dsn import complaint

SECRET = "bounce-kill-secret-0123456789abcdef"
READERS = [f"reader{n:03}@example.net" for n in range(400)]
KILLS = 3  # each kill a new chance to land between a record and its suppression


def counts(target: Path | str) -> tuple[int, int]:
    """Complaints recorded, readers suppressed."""
    with open_database(target) as database:
        ((recorded,),) = database.backend.fetch(
            "SELECT count(*) FROM bounce_reports WHERE kind = 'complaint'"
        )
        ((suppressed,),) = database.backend.fetch(
            "SELECT count(*) FROM suppressions WHERE list = 'main' AND source = 'complained'"
        )
    return int(recorded), int(suppressed)


def bounces(project: Path, env: dict[str, str], folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "newsletter", "bounces", "--maildir", str(folder)],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_bounces_killed_part_way_and_run_again_applies_each_complaint_once(
    project: Path, database_target: Path | str
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NEWSLETTER_")},
        "NEWSLETTER_SECRET": SECRET,
    }
    if isinstance(database_target, str):
        env["NEWSLETTER_OUTBOX__URL"] = database_target
    else:
        database_target = project / ".newsletter" / "outbox.sqlite3"
    folder = project / "bounce-mail"
    box = mailbox.Maildir(folder, create=True)
    with open_database(database_target) as database:
        plan(database, 14, "main", READERS)
        journal = database.journal(None)
        for row in due(database, 14, "main"):
            journal.record(row.id, DeliveryStatus.SENT, code=250, reply="ok")
            original = (
                "Return-Path: <bounces@news.example.org>\r\n"
                f"To: {row.recipient}\r\nSubject: Issue 14\r\n"
                f"{TAG_HEADER}: {make_tag(SECRET.encode(), row.id)}\r\n\r\nbody\r\n"
            ).encode()
            box.add(complaint(original))
        journal.commit()
    recorded = 0
    for _ in range(KILLS):
        cut = bounces(project, env, folder)
        while counts(database_target)[0] == recorded:  # reports are being applied: kill there
            time.sleep(0.002)
        cut.send_signal(signal.SIGKILL)
        cut.communicate(timeout=60)
        recorded, suppressed = counts(database_target)
        assert recorded < len(READERS), "the kill came after the run: nothing was cut short"
        # What the killed run left: each report recorded has its reader suppressed.
        assert suppressed == recorded
    again = bounces(project, env, folder)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert counts(database_target) == (len(READERS), len(READERS))
    assert f"{len(READERS) - recorded} address(es) suppressed" in out


FAILING = {
    "sqlite": [
        "CREATE TRIGGER disk_full BEFORE INSERT ON suppressions"
        " BEGIN SELECT RAISE(ABORT, 'disk full'); END"
    ],
    "postgres": [
        "CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql"
        " AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$",
        "CREATE TRIGGER disk_full BEFORE INSERT ON suppressions"
        " FOR EACH ROW EXECUTE FUNCTION full_disk()",
    ],
}

REPAIRED = {"sqlite": "", "postgres": " ON suppressions"}  # what DROP TRIGGER needs after its name


@pytest.mark.parametrize("path", ["mailed", "posted"])
def test_a_suppression_that_fails_leaves_the_report_for_the_next_try(
    database: Database, path: str
) -> None:
    """The same cut, made by the database itself: the suppression's insert fails (a trigger
    stands in for a full disk), so neither the report's record nor the webhook event's claim
    may stay behind without it: the next run, or the provider's retry, applies it."""
    plan(database, 14, "main", READERS[:1])
    (row,) = due(database, 14, "main")
    record(database, row.id, DeliveryStatus.SENT, code=250, reply="ok")
    tag = make_tag(SECRET.encode(), row.id)
    policy = Policy(database, BouncesSettings(), [SECRET.encode()])
    report = Report(
        key="<arf-1@fbl.example.net>",
        kind=Kind.COMPLAINT,
        source="arf",
        findings=(Diagnosis(row.recipient, Kind.COMPLAINT),),
        tags=(tag,),
        message_ids=(),
        subject="Abuse report",
        sender="feedback@fbl.example.net",
    )
    event = Event("sendgrid", "complaint-1", Kind.COMPLAINT, row.recipient, tag=tag)

    def apply() -> Verdict:
        if path == "mailed":
            return policy.apply(report).verdict
        return apply_events(database, policy, [event], time.time())[0].verdict

    for statement in FAILING[database.backend.name]:
        database.backend.run(statement)
    with pytest.raises(DatabaseError, match="disk full"):
        apply()
    database.backend.run(f"DROP TRIGGER disk_full{REPAIRED[database.backend.name]}")
    assert apply() is Verdict.COMPLAINT
    assert database.suppressions.contains("main", row.recipient)
