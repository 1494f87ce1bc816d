"""outbox.Outbox: the SQLite delivery log on disk, its states, crash recovery and suppressions."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from newsletter.errors import DeliveryError
from newsletter.models import DeliveryStatus as S
from newsletter.outbox import Outbox


@pytest.fixture
def outbox(tmp_path: Path) -> Iterator[Outbox]:
    box = Outbox(tmp_path / "state" / "outbox.sqlite3")
    yield box
    box.close()


def test_wal_on_disk_with_one_row_per_recipient(outbox: Outbox) -> None:
    outbox.plan(14, "main", ["a@example.com", "B@example.com", "b@example.com "])
    assert [r.recipient for r in outbox.rows(14, "main")] == ["a@example.com", "b@example.com"]
    outbox.plan(14, "main", ["a@example.com", "b@example.com", "c@example.com"])
    assert len(outbox.rows(14, "main")) == 3
    outbox.plan(14, "staging", ["a@example.com"])
    assert len(outbox.rows(14, "staging")) == 1
    db = sqlite3.connect(outbox.path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO deliveries (issue, list, recipient, created_at, updated_at)"
            " VALUES (14, 'main', 'a@example.com', '', '')"
        )
    assert outbox.counts(14, "main")[S.PENDING] == 3


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


def test_marks_and_outcomes_are_committed_at_once(tmp_path: Path) -> None:
    """The in-doubt window is only the upload: another process sees `sending` before DATA and
    the outcome as soon as it is recorded, so a kill after the reply never leaves it unknown."""
    path = tmp_path / "outbox.sqlite3"
    sender = Outbox(path)
    sender.plan(14, "main", ["a@example.com", "b@example.com"])
    a, _ = sender.due(14, "main")
    other = Outbox(path)  # another process reads only what is committed

    def committed() -> dict[str, S]:
        return {r[0]: S(r[1]) for r in other._db.execute("SELECT recipient, state FROM deliveries")}

    sender.mark_sending(a.id, "<a@x>")
    assert committed()["a@example.com"] == S.SENDING
    sender.record(a.id, S.SENT, code=250, reply="queued as A")
    assert committed() == {"a@example.com": S.SENT, "b@example.com": S.PENDING}
    assert other.recover(14, "main") == []
    sender.close()
    other.close()


def test_a_crash_leaves_sending_which_recover_turns_into_unknown(tmp_path: Path) -> None:
    path = tmp_path / "outbox.sqlite3"
    first = Outbox(path)
    first.plan(14, "main", ["a@example.com", "b@example.com"])
    a, _ = first.due(14, "main")
    first.mark_sending(a.id, "<a@x>")
    # No close: as if the process had been killed here.
    second = Outbox(path)
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
    outbox.plan(14, "main", ["a@example.com", "b@example.com"])
    assert outbox.counts(14, "main")[S.SKIPPED] == 2
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
        Outbox(path)
