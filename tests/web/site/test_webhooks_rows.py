"""A provider's event acts on the row of the person it names, and on nobody else's (issue 40,
points 5 and 12), through the running site as a provider reaches it, with the commands an editor
runs (`subscribers forget`, `bounces --held`): an old tag naming a new row (the outbox deleted,
the secret kept, or another newsletter's sharing it) is held for review, not applied; an event
about a person erased on request leaves no trace of them in any table, column, JSON field or
file, nor in `bounces --held`. Each with the outbox on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from newsletter.bounces.verp import make_tag
from newsletter.cli.main import cli
from newsletter.config.settings import load_settings
from newsletter.database import Database, open_database
from newsletter.models import DeliveryStatus
from support.database import due, plan, record
from support.erasure import dump_outbox, raw_bytes
from support.hooks import SendGridKey
from support.site import SECRET, RunningService, running_service

KEY = SendGridKey()
ANN = "ann@example.com"
BOB = "bob@example.net"
DAVE = "dave@example.net"
REFUSED = "550 5.1.1 <{}>: Recipient address rejected: User unknown in virtual mailbox table"


@pytest.fixture(params=["sqlite", "postgres"])
def outbox(request: pytest.FixtureRequest) -> dict[str, str]:
    """The settings that put the project's outbox on each backend in turn."""
    if request.param == "sqlite":
        return {}
    return {"NEWSLETTER_OUTBOX__URL": request.getfixturevalue("postgres_url")}


@pytest.fixture
def site(project: Path, outbox: dict[str, str]) -> Iterator[RunningService]:
    with running_service(project, NEWSLETTER_WEBHOOK_SENDGRID_KEY=KEY.public, **outbox) as running:
        yield running


def run(project: Path, outbox: dict[str, str], *args: str) -> Result:
    """`newsletter ARGS` as the editor types it, with the site's secret and outbox."""
    return CliRunner().invoke(
        cli,
        ["--config", str(project / "newsletter.toml"), *args],
        env={"NEWSLETTER_SECRET": SECRET, **outbox},
    )


def sent(database: Database, issue: int, readers: list[str]) -> dict[str, tuple[int, str]]:
    """Issue `issue` sent to `readers` on main: each one's row id and Message-ID (opaque, as
    a send makes them: mail/message.py)."""
    ids = {a: f"<{secrets.token_hex(16)}@news.example.org>" for a in readers}
    plan(database, issue, "main", readers, ids)
    rows = {}
    for row in due(database, issue, "main"):
        record(database, row.id, DeliveryStatus.SENT, code=250, reply="ok")
        rows[row.recipient] = (row.id, ids[row.recipient])
    return rows


def sendgrid(site: RunningService, *items: dict[str, object]) -> httpx.Response:
    """SendGrid's signed POST of `items`, each its documented event fields."""
    body = json.dumps([{"timestamp": 1513299569, **item} for item in items]).encode()
    url = f"{site.url}/webhooks/sendgrid"
    return httpx.post(url, content=body, headers=KEY.headers(body))


def bounce(address: str, event_id: str, **extra: str) -> dict[str, object]:
    """SendGrid's documented bounce, its reason quoting the address as a relay's 550 does."""
    return {
        "email": address,
        "event": "bounce",
        "sg_event_id": event_id,
        "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
        "reason": REFUSED.format(address),
        "status": "5.1.1",
        "type": "bounce",
        **extra,
    }


def test_an_old_tag_naming_a_new_row_is_held_and_suppresses_nobody(
    project: Path, outbox: dict[str, str]
) -> None:
    """Bob's tag from an outbox that is gone (on SQLite: the project's own file, deleted; on
    PostgreSQL: another newsletter's, sharing the secret) names Dave's row of the project's
    outbox. SendGrid's bounce for Bob is held for review (`bounces --held` says whom it is
    about and whose row the tag names), Dave is not suppressed and nothing is recorded on his
    row (Bob's text is not filed as his); the provider's retry changes nothing."""
    environ = {"NEWSLETTER_SECRET": SECRET, **outbox}
    settings = load_settings(project / "newsletter.toml", environ=environ)
    target = settings.database_target
    old_outbox = project / ".newsletter" / "outbox.sqlite3"
    if not outbox:
        assert target == old_outbox
    else:  # the other newsletter's project: its own outbox, the same NEWSLETTER_SECRET
        old_outbox = project.parent / "other-newsletter" / "outbox.sqlite3"
    with open_database(old_outbox) as old:
        ((bobs_row, _),) = sent(old, 13, [BOB]).values()
    old_tag = make_tag(SECRET.encode(), bobs_row)
    if not outbox:
        for path in old_outbox.parent.glob(old_outbox.name + "*"):
            path.unlink()

    with running_service(project, NEWSLETTER_WEBHOOK_SENDGRID_KEY=KEY.public, **outbox) as site:
        with open_database(target) as database:
            ((daves_row, _),) = sent(database, 14, [DAVE]).values()
        assert daves_row == bobs_row  # each outbox numbers its rows from 1
        event = bounce(BOB, "bob-bounce-1", newsletter_tag=old_tag)
        for _ in range(2):  # SendGrid retries
            assert sendgrid(site, event).status_code == 200
        assert site.wait_for_log("event bob-bounce-1: hard, held for review")
        assert site.wait_for_log("event bob-bounce-1: hard, already counted")

        with open_database(target) as database:
            assert database.suppressions.get("main", DAVE) is None
            assert database.backend.fetch("SELECT * FROM bounce_reports") == []
            (held,) = database.bounces.held()
            assert (held.report, held.delivery.recipient) == ("sendgrid:bob-bounce-1", DAVE)
        listed = run(project, outbox, "bounces", "--held")
        assert listed.exit_code == 0, listed.output
        (line,) = [x for x in listed.output.splitlines() if "sendgrid" in x]
        assert f"it is about {BOB}, but its tag names the message to {DAVE}" in line
        assert "1 report(s) held for review" in listed.output


def test_an_event_about_a_forgotten_reader_keeps_nothing_that_names_her(
    project: Path, outbox: dict[str, str], site: RunningService
) -> None:
    """After `subscribers forget ann@example.com`: SendGrid's bounce for her row, whose reason
    quotes `<ann@example.com>`, keeps only its kind and status; a complaint carrying only her
    Message-ID is not held (its reason would name her). No table, column, JSON field, file of the
    project's state or log line holds her address, and `bounces --held` does not print her."""
    target = site.settings.database_target
    assert run(project, outbox, "subscribers", "add", ANN).exit_code == 0
    with open_database(target) as database:
        rows = sent(database, 14, [ANN, BOB])
    (ann_row, ann_message_id), (bob_row, _) = rows[ANN], rows[BOB]
    forgotten = run(project, outbox, "subscribers", "forget", ANN, "--yes")
    assert forgotten.exit_code == 0, forgotten.output

    tagged = bounce(ANN, "ann-bounce-1", newsletter_tag=make_tag(SECRET.encode(), ann_row))
    quoted = {"email": ANN, "event": "spamreport", "sg_event_id": "ann-spam-1"}
    quoted["smtp-id"] = ann_message_id
    bobs = bounce(BOB, "bob-bounce-1", newsletter_tag=make_tag(SECRET.encode(), bob_row))
    assert sendgrid(site, tagged, quoted, bobs).status_code == 200
    assert site.wait_for_log("event bob-bounce-1: hard, hard")

    with open_database(target) as database:
        assert database.bounces.held() == []
        kept = database.backend.fetch(
            "SELECT report, delivery_id, kind, status, detail FROM bounce_reports ORDER BY report"
        )
        assert [tuple(r) for r in kept] == [
            ("sendgrid:ann-bounce-1", ann_row, "hard", "5.1.1", ""),  # the send's counts
            ("sendgrid:bob-bounce-1", bob_row, "hard", "5.1.1", REFUSED.format(BOB)),
        ]
        assert database.suppressions.get("main", BOB) is not None
        every_value = dump_outbox(database)
    listed = run(project, outbox, "bounces", "--held")
    assert listed.exit_code == 0, listed.output
    assert "0 report(s) held for review" in listed.output
    status = run(project, outbox, "status", "--issue", "14", "--list", "main")
    assert status.exit_code == 0, status.output
    assert REFUSED.format(BOB) in every_value  # the scan reads the rows: Bob's text is there
    for said in (listed.output, status.output, every_value, *site.log.lines):
        assert ANN not in said.lower()
    for path in sorted((project / ".newsletter").rglob("*")):
        if path.is_file():  # the SQLite outbox and its WAL among them
            assert ANN.encode() not in path.read_bytes().lower(), path
    if isinstance(target, Path):
        assert ANN.encode() not in raw_bytes(target)
