"""outbox.Outbox on both backends (a SQLite file, a real PostgreSQL server): its states, crash
recovery, suppressions and schema migrations."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import psycopg
import pytest

from newsletter.errors import DeliveryError, OutboxError
from newsletter.models import DeliveryStatus as S
from newsletter.outbox import EDITOR_SOURCE, Outbox, open_outbox, schema
from newsletter.outbox import sqlite as sqlite_backend


def test_one_row_per_recipient(outbox: Outbox) -> None:
    plan = outbox.plan(14, "main", ["a@example.com", "B@example.com", "b@example.com "])
    assert (plan.added, plan.total) == (2, 2)
    again = outbox.plan(14, "main", ["a@example.com", "b@example.com", "c@example.com"])
    assert (again.added, again.total) == (1, 3)
    other_list = outbox.plan(14, "staging", ["a@example.com"])
    assert other_list.added == 1
    assert outbox.counts(14, "main")[S.PENDING] == 3


def test_sqlite_is_a_wal_file_with_a_unique_key(tmp_path: Path) -> None:
    with open_outbox(tmp_path / "outbox.sqlite3") as outbox:
        outbox.plan(14, "main", ["a@example.com"])
    db = sqlite3.connect(tmp_path / "outbox.sqlite3")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO deliveries (issue, list, recipient, created_at, updated_at)"
            " VALUES (14, 'main', 'a@example.com', '', '')"
        )


def test_postgres_has_the_same_unique_key(postgres_url: str) -> None:
    with open_outbox(postgres_url) as outbox:
        assert outbox.backend == "postgres"
        outbox.plan(14, "main", ["a@example.com"])
    with psycopg.connect(postgres_url) as db, pytest.raises(psycopg.errors.UniqueViolation):
        db.execute(
            "INSERT INTO deliveries (issue, list, recipient, created_at, updated_at)"
            " VALUES (14, 'main', 'a@example.com', '', '')"
        )


def test_a_row_goes_through_its_states(outbox: Outbox) -> None:
    outbox.plan(14, "main", ["a@example.com"])
    (row,) = outbox.due(14, "main")
    outbox.mark_sending(row.id, "<m1@x>")
    outbox.record(row.id, S.SENT, code=250, reply="2.0.0 Ok: queued as ABC")
    (done,) = outbox.rows(14, "main")
    assert done.state == S.SENT
    assert done.attempts == 1
    assert done.message_id == "<m1@x>"
    assert "queued as ABC" in done.smtp_reply
    assert done.sent_at
    assert outbox.due(14, "main") == []


def test_message_id_is_kept_from_the_first_attempt(outbox: Outbox) -> None:
    outbox.plan(14, "main", ["a@example.com"])
    (row,) = outbox.due(14, "main")
    outbox.mark_sending(row.id, "<first@x>")
    outbox.record(row.id, S.DEFERRED, code=451, reply="later")
    outbox.mark_sending(row.id, "<second@x>")
    (again,) = outbox.rows(14, "main")
    assert again.message_id == "<first@x>"
    assert again.attempts == 2


def test_planning_stores_message_ids_and_never_replaces_one(outbox: Outbox) -> None:
    outbox.plan(14, "main", ["a@example.com", "b@example.com"])
    a, _ = outbox.due(14, "main")
    outbox.mark_sending(a.id, "<first@x>")
    outbox.record(a.id, S.DEFERRED, code=451, reply="later")
    ids = {"a@example.com": "<a@x>", "B@example.com": "<b@x>", "c@example.com": "<c@x>"}
    outbox.plan(14, "main", ["a@example.com", "b@example.com", "c@example.com"], ids)
    rows = {r.recipient: r for r in outbox.due(14, "main")}
    assert {r: row.message_id for r, row in rows.items()} == {
        "a@example.com": "<first@x>",  # kept from its first attempt
        "b@example.com": "<b@x>",
        "c@example.com": "<c@x>",
    }
    outbox.mark_sending(rows["b@example.com"].id, None)  # None: the row holds its ID already
    outbox.record(rows["b@example.com"].id, S.SENT, code=250)
    (sent,) = outbox.rows(14, "main", [S.SENT])
    assert (sent.message_id, sent.attempts) == ("<b@x>", 1)


def test_marks_and_outcomes_are_committed_at_once(outbox_target: Path | str) -> None:
    """The in-doubt window is only the upload: another process sees `sending` before DATA and
    the outcome as soon as it is recorded, so a kill after the reply never leaves it unknown."""
    sender = open_outbox(outbox_target)
    sender.plan(14, "main", ["a@example.com", "b@example.com"])
    a, _ = sender.due(14, "main")
    other = open_outbox(outbox_target)  # another connection reads only what is committed

    def committed() -> dict[str, S]:
        return {r.recipient: r.state for r in other.rows(14, "main")}

    sender.mark_sending(a.id, "<a@x>")
    assert committed()["a@example.com"] == S.SENDING
    sender.record(a.id, S.SENT, code=250, reply="queued as A")
    assert committed() == {"a@example.com": S.SENT, "b@example.com": S.PENDING}
    assert other.recover(14, "main") == []
    sender.close()
    other.close()


def test_a_held_outcome_commits_with_the_next_mark_a_release_or_a_write(
    outbox_target: Path | str,
) -> None:
    """`held` outcomes share the commit of what follows (SQLite; PostgreSQL commits at once):
    never later than the next `sending` mark, so never after another body went out."""
    sender = open_outbox(outbox_target)
    sender.plan(14, "main", ["a@example.com", "b@example.com", "c@example.com"])
    a, b, c = sender.due(14, "main")
    other = open_outbox(outbox_target)
    shares = isinstance(outbox_target, Path)

    def committed() -> list[S]:
        return [r.state for r in other.rows(14, "main")]

    sender.mark_sending(a.id, "<a@x>")
    assert sender.record(a.id, S.SENT, code=250, reply="queued as A", held=True)
    assert committed()[0] == (S.SENDING if shares else S.SENT)
    sender.mark_sending(b.id, "<b@x>")  # one commit carries both
    assert committed() == [S.SENT, S.SENDING, S.PENDING]
    sender.record(b.id, S.SENT, code=250, reply="queued as B", held=True)
    sender.release()
    assert committed() == [S.SENT, S.SENT, S.PENDING]
    sender.mark_sending(c.id, "<c@x>")
    sender.record(c.id, S.DEFERRED, code=451, reply="later", held=True)
    with pytest.raises(RuntimeError), sender._write():  # a failing block rolls back only itself
        raise RuntimeError
    assert committed() == [S.SENT, S.SENT, S.DEFERRED]
    # A claim (an UPDATE read back) commits at once, and what was held with it.
    sender.record(a.id, S.DEFERRED, code=451, reply="again", held=True)
    assert [r.id for r in sender.claim(14, "main", "w1", 10, max_tries=9, at=1e12)] == [a.id, c.id]
    assert other.held_by_others(14, "main", "w2") == 2
    assert committed() == [S.DEFERRED, S.SENT, S.DEFERRED]
    sender.close()
    other.close()


def test_a_held_outcome_lost_in_a_crash_leaves_the_row_in_doubt(tmp_path: Path) -> None:
    first = open_outbox(tmp_path / "outbox.sqlite3")
    first.plan(14, "main", ["a@example.com"])
    (a,) = first.due(14, "main")
    first.mark_sending(a.id, "<a@x>")
    first.record(a.id, S.SENT, code=250, reply="queued as A", held=True)
    first._db.close()  # type: ignore[attr-defined]  # killed: the held transaction is gone
    second = open_outbox(tmp_path / "outbox.sqlite3")
    assert [r.state for r in second.recover(14, "main")] == [S.UNKNOWN]  # never sent twice
    second.close()


def test_a_crash_leaves_sending_which_recover_turns_into_unknown(outbox_target: Path | str) -> None:
    first = open_outbox(outbox_target)
    first.plan(14, "main", ["a@example.com", "b@example.com"])
    a, _ = first.due(14, "main")
    first.mark_sending(a.id, "<a@x>")
    # No close: as if the process had been killed here.
    second = open_outbox(outbox_target)
    recovered = second.recover(14, "main")
    assert [r.recipient for r in recovered] == ["a@example.com"]
    counts = second.counts(14, "main")
    assert (counts[S.UNKNOWN], counts[S.PENDING], counts[S.SENDING]) == (1, 1, 0)
    assert [r.recipient for r in second.due(14, "main")] == ["b@example.com"]
    assert second.reopen(14, "main", [S.UNKNOWN]) == 1
    due = second.due(14, "main")
    assert [r.message_id for r in due] == ["<a@x>", None]
    first.close()
    second.close()


def test_plan_skips_suppressed_and_departed_recipients(outbox: Outbox) -> None:
    outbox.plan(14, "main", ["a@example.com", "b@example.com", "c@example.com"])
    assert outbox.suppress("main", "B@Example.com", "one-click")
    assert not outbox.suppress("main", "b@example.com", "one-click")
    assert outbox.is_suppressed("main", "b@example.com")
    assert not outbox.is_suppressed("staging", "b@example.com")
    assert outbox.suppressed("main") == {"b@example.com"}
    plan = outbox.plan(14, "main", ["a@example.com", "b@example.com"])
    assert plan.skipped == 2
    rows = {r.recipient: r for r in outbox.rows(14, "main")}
    assert rows["b@example.com"].state == S.SKIPPED
    assert rows["b@example.com"].smtp_reply == "unsubscribed"
    assert rows["c@example.com"].state == S.SKIPPED
    assert "no longer on the list" in rows["c@example.com"].smtp_reply
    assert rows["a@example.com"].state == S.PENDING


def test_sent_rows_are_never_skipped_or_due_again(outbox: Outbox) -> None:
    outbox.plan(14, "main", ["a@example.com"])
    (row,) = outbox.due(14, "main")
    outbox.mark_sending(row.id, "<a@x>")
    outbox.record(row.id, S.SENT, code=250)
    outbox.suppress("main", "a@example.com", "one-click")
    outbox.plan(14, "main", [])
    assert outbox.rows(14, "main")[0].state == S.SENT
    assert outbox.reopen(14, "main", [S.UNKNOWN, S.FAILED]) == 0


def test_unreadable_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(DeliveryError, match="cannot open the delivery log"):
        open_outbox(path)


def test_the_editors_suppression_replaces_the_readers_and_is_kept(outbox: Outbox) -> None:
    # issue 13.9: the editor's unsubscribe kept the reader's source, so their re-subscribe
    # could lift it.
    assert outbox.suppress("main", "a@example.com", "one-click")
    assert outbox.suppress("main", "A@example.com", EDITOR_SOURCE)
    assert not outbox.suppress("main", "a@example.com", EDITOR_SOURCE)
    assert not outbox.suppress("main", "a@example.com", "web")
    found = outbox.suppression("main", "a@example.com")
    assert found is not None
    assert found.source == EDITOR_SOURCE
    assert not outbox.unsuppress("main", "a@example.com", sources=("one-click", "web"))
    assert outbox.is_suppressed("main", "a@example.com")


def test_unreachable_postgres_is_a_clear_error_without_the_password() -> None:
    from support.postgres import free_port

    url = f"postgresql://newsletter:hunter2-secret@127.0.0.1:{free_port()}/nl"
    with pytest.raises(DeliveryError, match="cannot connect to the outbox database") as caught:
        open_outbox(url)
    assert "hunter2" not in str(caught.value.message)
    assert "newsletter:***@127.0.0.1" in caught.value.message


def test_migrations_are_numbered_in_order_and_applied_once(outbox_target: Path | str) -> None:
    versions = [m.version for m in schema.MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1))
    with open_outbox(outbox_target) as first, open_outbox(outbox_target) as second:
        assert first.version() == second.version() == schema.LATEST
        assert first.migrate() == []
        assert second.migrate() == []


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
    with open_outbox(path) as outbox:
        assert outbox.version() == schema.LATEST
        (row,) = outbox.rows(14, "main")
        assert (row.envelope, row.state) == ("a@example.com", S.SENT)


def test_a_newer_schema_is_refused(outbox_target: Path | str) -> None:
    with open_outbox(outbox_target) as outbox:
        outbox._run(
            "INSERT INTO schema_migrations (version, about, applied_at) VALUES (?, ?, ?)",
            (schema.LATEST + 1, "from the future", "t"),
        )
    with pytest.raises(DeliveryError, match="newer than this newsletter knows"):
        open_outbox(outbox_target)


def test_a_writer_waits_for_anothers_lock_then_commits(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    with open_outbox(path) as outbox:
        outbox.plan(14, "main", ["a@example.com"])
        (row,) = outbox.due(14, "main")
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another process's write transaction
        holder = threading.Timer(0.2, other.execute, ("COMMIT",))
        holder.start()
        started = time.monotonic()
        outbox.mark_sending(row.id, "<m1@x>")  # neither lost nor "database is locked"
        waited = time.monotonic() - started
        holder.join()
        (marked,) = outbox.rows(14, "main")
    assert marked.state == S.SENDING
    assert waited >= 0.15  # it did wait for the lock (a bound that cannot pass by accident)


def test_a_lock_held_past_the_busy_timeout_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_backend, "BUSY_TIMEOUT", 0.1)
    path = tmp_path / "outbox.sqlite3"
    with open_outbox(path) as outbox:
        outbox.plan(14, "main", ["a@example.com"])
        (row,) = outbox.due(14, "main")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        with pytest.raises(OutboxError, match="stayed locked by another program") as caught:
            outbox.mark_sending(row.id, "<m1@x>")
        assert "end it, then re-run" in caught.value.hint
        # The next write on the way out fails at once rather than waiting again (issue 18.9).
        waited = time.monotonic() - started
        started = time.monotonic()
        with pytest.raises(OutboxError, match="stayed locked"):
            outbox.record(row.id, S.SENT, code=250)
        assert time.monotonic() - started < waited / 2
        other.execute("ROLLBACK")
        assert outbox.mark_sending(row.id, "<m1@x>")  # the lock free: it writes again
