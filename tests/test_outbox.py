"""outbox.Database on both backends (a SQLite file, a real PostgreSQL server): its states, crash
recovery, suppressions and schema migrations."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest

from newsletter.database import EDITOR_SOURCE, Database, open_database, schema
from newsletter.database import sqlite as sqlite_backend
from newsletter.errors import DatabaseError
from newsletter.models import DeliveryStatus as S
from support.database import due, mark_sending, plan, record


def test_one_row_per_recipient(database: Database) -> None:
    first = plan(database, 14, "main", ["a@example.com", "B@example.com", "b@example.com "])
    assert (first.added, first.total) == (2, 2)
    again = plan(database, 14, "main", ["a@example.com", "b@example.com", "c@example.com"])
    assert (again.added, again.total) == (1, 3)
    other_list = plan(database, 14, "staging", ["a@example.com"])
    assert other_list.added == 1
    assert database.deliveries.counts(14, "main")[S.PENDING] == 3


def test_sqlite_is_a_wal_file_with_a_unique_key(tmp_path: Path) -> None:
    with open_database(tmp_path / "outbox.sqlite3") as database:
        plan(database, 14, "main", ["a@example.com"])
    db = sqlite3.connect(tmp_path / "outbox.sqlite3")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO deliveries (issue, list, recipient, created_at, updated_at)"
            " VALUES (14, 'main', 'a@example.com', '', '')"
        )


def test_postgres_has_the_same_unique_key(postgres_url: str) -> None:
    with open_database(postgres_url) as database:
        assert database.backend.name == "postgres"
        plan(database, 14, "main", ["a@example.com"])
    with psycopg.connect(postgres_url) as db, pytest.raises(psycopg.errors.UniqueViolation):
        db.execute(
            "INSERT INTO deliveries (issue, list, recipient, created_at, updated_at)"
            " VALUES (14, 'main', 'a@example.com', '', '')"
        )


def test_a_row_goes_through_its_states(database: Database) -> None:
    plan(database, 14, "main", ["a@example.com"])
    (row,) = due(database, 14, "main")
    mark_sending(database, row.id, "<m1@x>")
    record(database, row.id, S.SENT, code=250, reply="2.0.0 Ok: queued as ABC")
    (done,) = database.deliveries.rows(14, "main")
    assert done.state == S.SENT
    assert done.attempts == 1
    assert done.message_id == "<m1@x>"
    assert "queued as ABC" in done.smtp_reply
    assert done.sent_at
    assert due(database, 14, "main") == []


def test_message_id_is_kept_from_the_first_attempt(database: Database) -> None:
    plan(database, 14, "main", ["a@example.com"])
    (row,) = due(database, 14, "main")
    mark_sending(database, row.id, "<first@x>")
    record(database, row.id, S.DEFERRED, code=451, reply="later")
    mark_sending(database, row.id, "<second@x>")
    (again,) = database.deliveries.rows(14, "main")
    assert again.message_id == "<first@x>"
    assert again.attempts == 2


def test_planning_stores_message_ids_and_never_replaces_one(database: Database) -> None:
    plan(database, 14, "main", ["a@example.com", "b@example.com"])
    a, _ = due(database, 14, "main")
    mark_sending(database, a.id, "<first@x>")
    record(database, a.id, S.DEFERRED, code=451, reply="later")
    ids = {"a@example.com": "<a@x>", "B@example.com": "<b@x>", "c@example.com": "<c@x>"}
    plan(database, 14, "main", ["a@example.com", "b@example.com", "c@example.com"], ids)
    rows = {r.recipient: r for r in due(database, 14, "main")}
    assert {r: row.message_id for r, row in rows.items()} == {
        "a@example.com": "<first@x>",  # kept from its first attempt
        "b@example.com": "<b@x>",
        "c@example.com": "<c@x>",
    }
    mark_sending(database, rows["b@example.com"].id, None)  # None: the row holds its ID already
    record(database, rows["b@example.com"].id, S.SENT, code=250)
    (sent,) = database.deliveries.rows(14, "main", [S.SENT])
    assert (sent.message_id, sent.attempts) == ("<b@x>", 1)


def test_marks_and_outcomes_are_committed_at_once(database_target: Path | str) -> None:
    """The in-doubt window is only the upload: another process sees `sending` before DATA and
    the outcome as soon as it is recorded, so a kill after the reply never leaves it unknown."""
    sender = open_database(database_target)
    plan(sender, 14, "main", ["a@example.com", "b@example.com"])
    a, _ = due(sender, 14, "main")
    other = open_database(database_target)  # another connection reads only what is committed

    def committed() -> dict[str, S]:
        return {r.recipient: r.state for r in other.deliveries.rows(14, "main")}

    mark_sending(sender, a.id, "<a@x>")
    assert committed()["a@example.com"] == S.SENDING
    record(sender, a.id, S.SENT, code=250, reply="queued as A")
    assert committed() == {"a@example.com": S.SENT, "b@example.com": S.PENDING}
    assert other.deliveries.recover(14, "main") == []
    sender.close()
    other.close()


def test_a_crash_leaves_sending_which_recover_turns_into_unknown(
    database_target: Path | str,
) -> None:
    first = open_database(database_target)
    plan(first, 14, "main", ["a@example.com", "b@example.com"])
    a, _ = due(first, 14, "main")
    mark_sending(first, a.id, "<a@x>")
    # No close: as if the process had been killed here.
    second = open_database(database_target)
    recovered = second.deliveries.recover(14, "main")
    assert [r.recipient for r in recovered] == ["a@example.com"]
    counts = second.deliveries.counts(14, "main")
    assert (counts[S.UNKNOWN], counts[S.PENDING], counts[S.SENDING]) == (1, 1, 0)
    assert [r.recipient for r in due(second, 14, "main")] == ["b@example.com"]
    assert second.deliveries.reopen(14, "main", [S.UNKNOWN]) == 1
    again = due(second, 14, "main")
    assert [r.message_id for r in again] == ["<a@x>", None]
    first.close()
    second.close()


def test_plan_skips_suppressed_and_departed_recipients(database: Database) -> None:
    plan(database, 14, "main", ["a@example.com", "b@example.com", "c@example.com"])
    assert database.suppressions.add("main", "B@Example.com", "one-click")
    assert not database.suppressions.add("main", "b@example.com", "one-click")
    assert database.suppressions.contains("main", "b@example.com")
    assert not database.suppressions.contains("staging", "b@example.com")
    assert database.suppressions.addresses("main") == {"b@example.com"}
    second = plan(database, 14, "main", ["a@example.com", "b@example.com"])
    assert second.skipped == 2
    rows = {r.recipient: r for r in database.deliveries.rows(14, "main")}
    assert rows["b@example.com"].state == S.SKIPPED
    assert rows["b@example.com"].smtp_reply == "unsubscribed"
    assert rows["c@example.com"].state == S.SKIPPED
    assert "no longer on the list" in rows["c@example.com"].smtp_reply
    assert rows["a@example.com"].state == S.PENDING


def test_sent_rows_are_never_skipped_or_due_again(database: Database) -> None:
    plan(database, 14, "main", ["a@example.com"])
    (row,) = due(database, 14, "main")
    mark_sending(database, row.id, "<a@x>")
    record(database, row.id, S.SENT, code=250)
    database.suppressions.add("main", "a@example.com", "one-click")
    plan(database, 14, "main", [])
    assert database.deliveries.rows(14, "main")[0].state == S.SENT
    assert database.deliveries.reopen(14, "main", [S.UNKNOWN, S.FAILED]) == 0


def test_unreadable_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(DatabaseError, match="cannot open the delivery log"):
        open_database(path)


def test_the_editors_suppression_replaces_the_readers_and_is_kept(database: Database) -> None:
    # issue 13.9: the editor's unsubscribe kept the reader's source, so their re-subscribe
    # could lift it.
    assert database.suppressions.add("main", "a@example.com", "one-click")
    assert database.suppressions.add("main", "A@example.com", EDITOR_SOURCE)
    assert not database.suppressions.add("main", "a@example.com", EDITOR_SOURCE)
    assert not database.suppressions.add("main", "a@example.com", "web")
    found = database.suppressions.get("main", "a@example.com")
    assert found is not None
    assert found.source == EDITOR_SOURCE
    assert not database.suppressions.remove("main", "a@example.com", sources=("one-click", "web"))
    assert database.suppressions.contains("main", "a@example.com")


def test_unreachable_postgres_is_a_clear_error_without_the_password() -> None:
    from support.postgres import free_port

    url = f"postgresql://newsletter:hunter2-secret@127.0.0.1:{free_port()}/nl"
    with pytest.raises(DatabaseError, match="cannot connect to the outbox database") as caught:
        open_database(url)
    assert "hunter2" not in str(caught.value.message)
    assert "newsletter:***@127.0.0.1" in caught.value.message


def test_migrations_are_numbered_in_order_and_applied_once(database_target: Path | str) -> None:
    versions = [m.version for m in schema.MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1))
    with open_database(database_target) as first, open_database(database_target) as second:
        assert first.backend.version() == second.backend.version() == schema.LATEST
        assert first.backend.migrate() == []
        assert second.backend.migrate() == []


def test_a_log_from_before_migrations_is_upgraded_in_place(tmp_path: Path) -> None:
    """A SQLite file written by the version before numbered migrations keeps its rows."""
    path = tmp_path / "outbox.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(schema.statements(schema.MIGRATIONS[0].sqlite)[0] + ";")
    db.execute(
        "INSERT INTO deliveries (issue, list, recipient, message_id, state, created_at,"
        " updated_at) VALUES (14, 'main', 'a@example.com', '<a@x>', 'sent', 't', 't')"
    )
    db.commit()
    db.close()
    with open_database(path) as database:
        assert database.backend.version() == schema.LATEST
        (row,) = database.deliveries.rows(14, "main")
        assert (row.envelope, row.state) == ("a@example.com", S.SENT)


def test_a_newer_schema_is_refused(database_target: Path | str) -> None:
    with open_database(database_target) as database:
        database.backend.run(
            "INSERT INTO schema_migrations (version, about, applied_at) VALUES (?, ?, ?)",
            (schema.LATEST + 1, "from the future", "t"),
        )
    with pytest.raises(DatabaseError, match="newer than this newsletter knows"):
        open_database(database_target)


def test_a_writer_waits_for_anothers_lock_then_commits(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    with open_database(path) as database:
        plan(database, 14, "main", ["a@example.com"])
        (row,) = due(database, 14, "main")
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another process's write transaction
        holder = threading.Timer(0.2, other.execute, ("COMMIT",))
        holder.start()
        started = time.monotonic()
        mark_sending(database, row.id, "<m1@x>")  # neither lost nor "database is locked"
        waited = time.monotonic() - started
        holder.join()
        (marked,) = database.deliveries.rows(14, "main")
    assert marked.state == S.SENDING
    assert waited >= 0.15  # it did wait for the lock (a bound that cannot pass by accident)


def no_pause(seconds: float) -> None:
    raise AssertionError(f"waited for the lock again ({seconds} s pause)")


def test_a_lock_held_past_the_busy_timeout_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "outbox.sqlite3"
    with open_database(path, lock_wait=0.1) as database:
        plan(database, 14, "main", ["a@example.com"])
        (row,) = due(database, 14, "main")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(DatabaseError, match="stayed locked by another program") as caught:
            mark_sending(database, row.id, "<m1@x>")
        assert "end it, then re-run" in caught.value.hint
        # The next write on the way out fails at once rather than waiting again (issue 18.9):
        # a wait starts with a pause, and here a pause would fail the test.
        monkeypatch.setattr(
            sqlite_backend, "time", SimpleNamespace(monotonic=time.monotonic, sleep=no_pause)
        )
        with pytest.raises(DatabaseError, match="stayed locked"):
            record(database, row.id, S.SENT, code=250)
        monkeypatch.setattr(sqlite_backend, "time", time)
        other.execute("ROLLBACK")
        assert mark_sending(database, row.id, "<m1@x>")  # the lock free: it writes again


def test_a_statement_a_signal_left_unread_does_not_hide_the_stop(postgres_url: str) -> None:
    # A SIGINT landing between psycopg sending a planning statement and reading its result left
    # the session busy; the run's own unlock then failed with "another command is already in
    # progress", and the user read "lost the connection to the outbox database" instead of
    # "stopped by SIGINT" (1 run in ~30 of the planning signal test on PostgreSQL).
    with open_database(postgres_url) as database:
        backend = database.backend
        assert backend.try_lock(0x6E6C_7E57)
        backend._db.pgconn.send_query(b"SELECT pg_sleep(30)")  # type: ignore[attr-defined]
        assert backend.fetch("SELECT 1") == [(1,)]
        backend.unlock(0x6E6C_7E57)  # the busy session's lock went with it: no error either
    with psycopg.connect(postgres_url, autocommit=True) as db:  # the server ends it at once
        deadline = time.monotonic() + 10
        while db.execute("SELECT pg_try_advisory_lock(%s)", (0x6E6C_7E57,)).fetchone() != (True,):
            assert time.monotonic() < deadline, "the busy session still holds its lock"
            time.sleep(0.05)
