"""The windows on bounce reports, on both backends: a waiting report past `[privacy]
held_retention_days` (counted from when it was held) goes, a decided one past it (counted from
its decision) goes, the newer stay; a recorded report past `[privacy] bounce_text_days` loses
the server's text and keeps what the counts are made of; the worker's duty and `newsletter
bounces` apply them."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from newsletter.bounces.retention import DAY, PRUNE_EVERY, BounceRetentionDuty, expire_reports
from newsletter.config.settings import Settings
from newsletter.database import Database, open_database, schema
from newsletter.database.bounces import ACCEPTED, DISMISSED
from newsletter.database.mailqueue import MailKind, MailState
from newsletter.models import DeliveryStatus
from support.database import plan, record

READERS = ["ann@example.com", "bob@example.com", "cy@example.com", "di@example.com"]


def held_reports(database: Database) -> dict[str, int]:
    """One report held about each reader's row; its id by reader."""
    plan(database, 14, "main", READERS)
    ids = {}
    for row in database.deliveries.rows(14, "main"):
        assert database.bounces.hold(
            f"<forged-{row.id}@stranger.example>",
            row.id,
            "complaint",
            "",
            "a stranger's words",
            "arf",
            "fbl@stranger.example",
            "fbl@stranger.example does not speak for it",
        )
        (found,) = [h for h in database.bounces.held() if h.delivery.id == row.id]
        ids[row.recipient] = found.id
    return ids


_BACKDATE = {
    column: f"UPDATE held_reports SET {column} = ? WHERE id = ?"  # noqa: S608 (two constants)
    for column in ("created_at", "decided_at")
}


def backdate(database: Database, held_id: int, column: str, days: float) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000+00:00", time.gmtime(time.time() - days * DAY))
    with database.backend.transaction():
        database.backend.run(_BACKDATE[column], (stamp, held_id))


def left(database: Database) -> set[int]:
    ((n,),) = database.backend.fetch("SELECT count(*) FROM held_reports")
    found = {h.id for state in ("held", ACCEPTED, DISMISSED) for h in database.bounces.held(state)}
    assert len(found) == n
    return found


def test_reports_past_the_window_go_waiting_or_decided(
    database: Database, settings: Settings
) -> None:
    days = settings.privacy.held_retention_days
    ids = held_reports(database)
    ann, bob, cy, di = (ids[r] for r in READERS)
    backdate(database, ann, "created_at", days + 1)  # waiting, past the window: goes
    backdate(database, bob, "created_at", days - 1)  # waiting, inside it: stays
    for ident, state in ((cy, ACCEPTED), (di, DISMISSED)):
        assert database.bounces.decide(ident, state)
        backdate(database, ident, "created_at", days + 30)
    backdate(database, di, "decided_at", days + 1)  # decided past the window: goes
    # Decided yesterday, held long ago: the decision stays so the next read files its mail.
    backdate(database, cy, "decided_at", 1)
    assert database.bounces.held_count() == 2
    assert expire_reports(database, settings).deleted == 2
    assert left(database) == {bob, cy}
    assert database.bounces.held_count() == 1
    assert expire_reports(database, settings).deleted == 0


def test_a_shorter_window_takes_more(database: Database, settings: Settings) -> None:
    ids = held_reports(database)
    backdate(database, ids[READERS[0]], "created_at", 40)
    backdate(database, ids[READERS[1]], "created_at", 10)
    assert expire_reports(database, settings).deleted == 0
    short = settings.model_copy(
        update={"privacy": settings.privacy.model_copy(update={"held_retention_days": 30})}
    )
    assert expire_reports(database, short).deleted == 1
    assert len(left(database)) == len(READERS) - 1


def test_the_worker_duty_deletes_them_then_waits(
    database: Database, settings: Settings, database_target: object
) -> None:
    days = settings.privacy.held_retention_days
    ids = held_reports(database)
    for reader in READERS[:3]:
        backdate(database, ids[reader], "created_at", days + 2)
    url = database_target if isinstance(database_target, str) else f"sqlite:///{database_target}"
    chosen = settings.model_copy(update={"outbox": settings.outbox.model_copy(update={"url": url})})
    said: list[str] = []
    duty = BounceRetentionDuty(chosen, said.append)

    async def rounds() -> list[float]:
        await duty.start()
        try:
            return [await duty.run_once(), await duty.run_once()]
        finally:
            await duty.stop()

    assert asyncio.run(rounds()) == [PRUNE_EVERY, PRUNE_EVERY]
    assert duty.deleted == 3
    assert said == [
        f"bounce-report retention: 3 report(s) held for review deleted after {days} days"
        " ([privacy] held_retention_days)"
    ]
    assert left(database) == {ids[READERS[3]]}


def test_an_id_is_never_given_to_another_report(database: Database, settings: Settings) -> None:
    """The editor accepts by the id `--held` showed: once the newest report went with the window,
    the next one held must not take its id."""
    ids = held_reports(database)
    newest = max(ids.values())
    backdate(database, newest, "created_at", settings.privacy.held_retention_days + 1)
    assert expire_reports(database, settings).deleted == 1
    (row,) = [r for r in database.deliveries.rows(14, "main") if ids[r.recipient] == newest]
    assert database.bounces.hold(
        "<another@stranger.example>", row.id, "hard", "", "", "dsn", "", ""
    )
    (after,) = [h for h in database.bounces.held() if h.report == "<another@stranger.example>"]
    assert after.id > newest
    assert database.bounces.held_report(newest) is None


def test_migration_11_keeps_the_held_reports_of_a_sqlite_outbox(tmp_path: Path) -> None:
    """A file from before migration 11 (held_reports without AUTOINCREMENT) keeps its reports,
    ids and states, and from then on never hands a deleted id out again."""
    path = tmp_path / "outbox.sqlite3"
    with open_database(path) as database:
        ids = held_reports(database)
        assert database.bounces.decide(ids[READERS[1]], DISMISSED)
    db = sqlite3.connect(path)
    with db:
        db.execute("ALTER TABLE held_reports RENAME TO kept")
        (five,) = [m for m in schema.MIGRATIONS if m.version == 5]
        db.executescript(five.sqlite)  # held_reports as migration 5 made it
        db.execute("INSERT INTO held_reports SELECT * FROM kept")
        db.execute("DROP TABLE kept")
        # 11 and any later one: migrate applies the migrations above the highest version stored.
        db.execute("DELETE FROM schema_migrations WHERE version >= 11")
    db.close()
    with open_database(path) as database:
        assert database.backend.version() == schema.LATEST
        assert {h.id for h in database.bounces.held()} == set(ids.values()) - {ids[READERS[1]]}
        assert [h.id for h in database.bounces.held(DISMISSED)] == [ids[READERS[1]]]
        newest = max(ids.values())
        with database.backend.transaction():
            database.backend.run("DELETE FROM held_reports WHERE id = ?", (newest,))
        row = database.deliveries.rows(14, "main")[0]
        assert database.bounces.hold("<later@x>", row.id, "hard", "", "", "dsn", "", "")
        (later,) = [h for h in database.bounces.held() if h.report == "<later@x>"]
        assert later.id == newest + 1


def test_a_recorded_report_keeps_its_kind_and_loses_the_servers_text(
    database: Database, settings: Settings
) -> None:
    plan(database, 14, "main", READERS[:2])
    old, new = database.deliveries.rows(14, "main")
    said = "550 5.1.1 <{}>: no such user"
    bounces = database.bounces
    assert bounces.record("<r1@x>", old.id, "hard", "5.1.1", said.format(old.recipient), "dsn")
    assert bounces.record("<r2@x>", new.id, "hard", "5.1.1", said.format(new.recipient), "dsn")
    days = settings.privacy.bounce_text_days
    stamp = time.strftime(
        "%Y-%m-%dT%H:%M:%S.000+00:00", time.gmtime(time.time() - (days + 1) * DAY)
    )
    with database.backend.transaction():
        database.backend.run(
            "UPDATE bounce_reports SET created_at = ? WHERE report = ?", (stamp, "<r1@x>")
        )

    done = expire_reports(database, settings)

    assert (done.deleted, done.cleared) == (0, 1)
    kept = dict(database.backend.fetch("SELECT report, detail FROM bounce_reports"))
    assert kept == {"<r1@x>": "", "<r2@x>": said.format(new.recipient)}
    assert bounces.counts(14, "main") == {"hard": 2}  # the counts are untouched
    assert done.lines(settings) == [
        f"1 bounce report(s) kept without the server's text after {days} days"
        " ([privacy] bounce_text_days)"
    ]
    assert expire_reports(database, settings).cleared == 0  # once


def test_stored_smtp_replies_lose_their_text_after_the_window(
    database: Database, settings: Settings
) -> None:
    """The replies of rows and site mail done with, last changed past bounce_text_days, are
    cleared (state and code stay); a newer one, and a row still in doubt, keep theirs."""
    plan(database, 14, "main", READERS[:3])
    old, new, doubt = database.deliveries.rows(14, "main")
    said = "550 5.1.1 <{}>: Recipient address rejected"
    for row, state in ((old, DeliveryStatus.REJECTED), (new, DeliveryStatus.REJECTED)):
        assert record(database, row.id, state, code=550, reply=said.format(row.recipient))
    assert record(database, doubt.id, DeliveryStatus.UNKNOWN, reply="in doubt")
    queue = database.site_mail
    mail = queue.queue(MailKind.CONFIRM, "main", READERS[0], READERS[0])
    (claimed,) = queue.claim("w", 1, 60)
    assert queue.record(mail, "w", MailState.REJECTED, 550, said.format(READERS[0]))
    days = settings.privacy.bounce_text_days
    stamp = time.strftime(
        "%Y-%m-%dT%H:%M:%S.000+00:00", time.gmtime(time.time() - (days + 1) * DAY)
    )
    with database.backend.transaction():
        database.backend.run(
            "UPDATE deliveries SET updated_at = ? WHERE id IN (?, ?)", (stamp, old.id, doubt.id)
        )
        database.backend.run("UPDATE site_mail SET updated_at = ?", (stamp,))

    done = expire_reports(database, settings)

    assert done.replies == 2
    kept = {
        r.id: (r.state, r.smtp_code, r.smtp_reply) for r in database.deliveries.rows(14, "main")
    }
    assert kept == {
        old.id: (DeliveryStatus.REJECTED, 550, ""),
        new.id: (DeliveryStatus.REJECTED, 550, said.format(new.recipient)),
        doubt.id: (DeliveryStatus.UNKNOWN, None, "in doubt"),
    }
    assert queue.get(claimed.id).smtp_reply == ""  # type: ignore[union-attr]
    assert expire_reports(database, settings).replies == 0  # once
