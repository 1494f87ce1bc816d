"""The journal, the commit rule every kill test rests on, on both backends: when a `sending` mark
or an outcome becomes durable, what a process killed at each instant leaves (a real SIGKILL of
a forked process), a batch that is all or nothing, the owner checks of a reaped worker, the
durability setting, and a reaper and a waking worker that never deadlock."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from newsletter.database import Database, Delivery, Journal, open_database
from newsletter.errors import DatabaseError
from newsletter.models import DeliveryStatus as S
from support.database import plan

W = "w1"


def claimed(database: Database, *addresses: str, lease: float = 30) -> list[Delivery]:
    """`addresses` planned and claimed by worker W."""
    plan(database, 14, "main", addresses)
    database.leases.register(W, 14, "main", "host", 1, lease)
    return database.leases.claim(14, "main", W, 100, max_tries=5, at=time.time() + 1)


def states(target: Path | str) -> dict[str, S]:
    """What another connection reads: only what is committed."""
    with open_database(target) as other:
        return {r.recipient: r.state for r in other.deliveries.rows(14, "main")}


def test_an_entry_is_durable_at_its_commit_and_not_before(database: Database) -> None:
    a, b = claimed(database, "a@example.com", "b@example.com")
    journal = database.journal(W)
    journal.mark(a.id, "<a@x>")
    journal.mark(b.id, "<b@x>")
    assert states(database.target) == {"a@example.com": S.PENDING, "b@example.com": S.PENDING}
    assert journal.commit() == [True, True]  # one transaction for both
    assert states(database.target) == {"a@example.com": S.SENDING, "b@example.com": S.SENDING}
    journal.record(b.id, S.SENT, code=250, reply="queued as B")
    journal.record(a.id, S.DEFERRED, code=451, reply="later", next_attempt_at=1.0)
    assert states(database.target)["b@example.com"] == S.SENDING
    assert journal.commit() == [True, True]  # in the order queued
    assert states(database.target) == {"a@example.com": S.DEFERRED, "b@example.com": S.SENT}
    assert journal.commit() == []  # nothing queued, nothing committed


@pytest.mark.slow
def test_every_entry_of_a_batch_applies_in_order(database: Database) -> None:
    """One statement writes a batch; a row met twice (a mark, then the outcome of an upload
    abandoned before its body) is written twice, in order, and so is a batch larger than one
    statement carries."""
    a, b = claimed(database, "a@example.com", "b@example.com")
    journal = database.journal(W)
    journal.mark(a.id, "<a@x>")
    journal.mark(b.id, "<b@x>")
    journal.record(a.id, S.DEFERRED, reply="stopped before the upload", next_attempt_at=2.0)
    journal.record(b.id, S.SENT, code=250, reply="queued as B")
    assert journal.commit() == [True, True, True, True]
    rows = {r.recipient: r for r in database.deliveries.rows(14, "main")}
    assert (rows["a@example.com"].state, rows["a@example.com"].attempts) == (S.DEFERRED, 1)
    assert rows["a@example.com"].next_attempt_at == 2.0
    assert rows["a@example.com"].message_id == "<a@x>"  # the mark's, kept by the outcome
    assert rows["a@example.com"].sent_at is None
    assert (rows["b@example.com"].state, rows["b@example.com"].smtp_code) == (S.SENT, 250)
    assert rows["b@example.com"].smtp_reply == "queued as B"
    assert rows["b@example.com"].sent_at is not None
    plan(database, 14, "main", [f"r{i}@example.com" for i in range(6000)])
    many = database.leases.claim(14, "main", W, 7000, max_tries=5, at=time.time() + 1)
    assert len(many) == 6000
    for row in many:
        journal.mark(row.id, f"<{row.id}@x>")
    assert journal.commit() == [True] * len(many)
    assert sum(s == S.SENDING for s in states(database.target).values()) == len(many)


# What a process killed at each instant of one message leaves, and what the next run makes of it.
INSTANTS: dict[str, tuple[S, S | None]] = {
    # instant: (the row's state after the kill, the state recovery leaves it in; None: due again)
    "mark queued": (S.PENDING, None),  # the body never went out: sent by the next run
    "mark committed": (S.SENDING, S.UNKNOWN),  # the upload may have begun: in doubt
    "outcome queued": (S.SENDING, S.UNKNOWN),  # delivered, but not known to be: in doubt
    "outcome committed": (S.SENT, S.SENT),
}


def _until(journal: Journal, row: Delivery, instant: str) -> None:
    journal.mark(row.id, "<a@x>")
    if instant == "mark queued":
        return
    journal.commit()
    if instant == "mark committed":
        return
    journal.record(row.id, S.SENT, code=250, reply="queued as A")
    if instant == "outcome queued":
        return
    journal.commit()


@pytest.mark.parametrize("instant", list(INSTANTS))
def test_a_process_killed_at_each_instant_leaves_nothing_doubled(
    database_target: Path | str, instant: str
) -> None:
    with open_database(database_target) as database:
        (row,) = claimed(database, "a@example.com")
    pid = os.fork()
    if pid == 0:  # the sender, killed at `instant`
        try:
            journal = open_database(database_target).journal(W)
            _until(journal, row, instant)
            os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL
    left, recovered = INSTANTS[instant]
    assert states(database_target) == {"a@example.com": left}
    with open_database(database_target) as database:
        in_doubt = database.deliveries.recover(14, "main")
        assert [r.state for r in in_doubt] == ([S.UNKNOWN] if recovered == S.UNKNOWN else [])
        (after,) = database.deliveries.rows(14, "main")
        due = [r.id for r in database.leases.claim(14, "main", "w2", 10, max_tries=5, at=2e9)]
    assert after.state == (recovered or S.PENDING)
    assert due == ([row.id] if recovered is None else [])


def test_a_batch_is_all_or_nothing(database: Database) -> None:
    (a,) = claimed(database, "a@example.com")
    good = ("UPDATE deliveries SET state = ? WHERE id = ?", ["sent", a.id])
    bad = ("UPDATE no_such_table SET state = ?", ["sent"])
    with pytest.raises(DatabaseError):
        database.backend.commit([good, bad])
    assert states(database.target) == {"a@example.com": S.PENDING}
    assert database.backend.commit([good, good]) == [[], []]  # the connection goes on
    assert states(database.target) == {"a@example.com": S.SENT}


def test_a_reaped_worker_writes_nothing_over_rows_that_are_not_its_own(
    database_target: Path | str,
) -> None:
    with open_database(database_target) as paused, open_database(database_target) as survivor:
        a, b = claimed(paused, "a@example.com", "b@example.com", lease=0.2)
        journal = paused.journal(W)
        journal.mark(a.id, "<a@x>")
        assert journal.commit() == [True]
        time.sleep(0.4)  # the lease runs out
        assert [r.id for r in survivor.leases.reap(14, "main")] == [a.id]  # now `unknown`
        journal.record(a.id, S.SENT, code=250)  # its late reply
        journal.mark(b.id, "<b@x>")  # and its next upload
        assert journal.commit() == [False, False]
    assert states(database_target) == {"a@example.com": S.UNKNOWN, "b@example.com": S.PENDING}


@pytest.mark.parametrize(
    ("durability", "sqlite", "postgres"), [("process", 1, "off"), ("power", 2, "on")]
)
def test_durability_means_the_same_on_both_backends(
    database_target: Path | str, durability: str, sqlite: int, postgres: str
) -> None:
    """ "process": a commit survives this process killed (SQLite synchronous=NORMAL, PostgreSQL
    synchronous_commit=off); "power": a power cut (FULL, on)."""
    with open_database(database_target, durability=durability) as database:  # type: ignore[arg-type]
        backend: Any = database.backend
        if database.backend.name == "sqlite":
            assert backend._db.execute("PRAGMA synchronous").fetchone()[0] == sqlite
        else:
            assert backend._db.execute("SHOW synchronous_commit").fetchone()[0] == postgres
        backend.reconnect()  # a worker process's own connection, or one reopened after a loss
        if database.backend.name == "sqlite":
            assert backend._db.execute("PRAGMA synchronous").fetchone()[0] == sqlite
        else:
            assert backend._db.execute("SHOW synchronous_commit").fetchone()[0] == postgres
            # The journal's commits and the claims go on connections of their own: the same
            # setting.
            backend.send_commit([("SELECT 1 WHERE false", [])]).wait()
            backend.send_fetch("SELECT 1 WHERE false").wait()
            for lane in ("journal", "claims"):
                conn = backend._lanes[lane].conn
                assert conn.execute("SHOW synchronous_commit").fetchone()[0] == postgres


def blocked_on_lock(url: str) -> None:
    """Return once some session on the server waits for a row lock (the clock is only a
    guard against a hang: a loaded machine may take its time to get there)."""
    deadline = time.monotonic() + 60
    with psycopg.connect(url, autocommit=True) as watcher:
        while not watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "the worker's commit never waited for the lock"
            time.sleep(0.01)


def test_a_reaper_never_waits_for_a_worker_writing_its_rows(postgres_url: str) -> None:
    """A worker paused past its lease wakes and commits an outcome and a mark (one statement,
    which reaches its rows in whatever order its plan takes) while another worker reaps it. The
    reaper takes all of the worker's rows at once or none: if the worker holds one, it leaves
    the worker for its next try. Waiting for that row while holding another, which the
    worker's commit might need next, could make the two wait in a circle (PostgreSQL then
    ends one of them: an error, and a stopped run)."""
    with (
        open_database(postgres_url) as waking,
        open_database(postgres_url) as reaper,
        psycopg.connect(postgres_url, autocommit=True) as holder,
    ):
        reaper.backend.run("SET lock_timeout = '3s'")  # a reaper that waits fails, not hangs
        a, b = claimed(waking, "a@example.com", "b@example.com", lease=0.2)
        first = waking.journal(W)
        first.mark(a.id, "<a@x>")
        assert first.commit() == [True]  # a is being uploaded, b claimed and waiting
        time.sleep(0.4)  # the lease runs out
        journal = waking.journal(W)
        journal.record(a.id, S.SENT, code=250)  # its late reply
        journal.mark(b.id, "<b@x>")  # and its next upload
        written: list[bool] = []
        woken = threading.Thread(target=lambda: written.extend(journal.commit()))
        with holder.transaction():
            # Someone else holds b for a moment, so the worker's commit holds a and waits.
            holder.execute("SELECT id FROM deliveries WHERE id = %s FOR UPDATE", (b.id,))
            woken.start()
            blocked_on_lock(postgres_url)  # the worker's commit holds a, waits for b
            assert reaper.leases.reap(14, "main") == []  # the worker is busy: next time
            # It did not wait for the worker: the worker is still blocked by this very
            # transaction, so a reaper that waited would have run into its lock_timeout.
            assert woken.is_alive()
            assert [w.id for w in reaper.leases.workers(14, "main", expired=True)] == [W]
        woken.join(10)
        assert written == [True, True]  # written before the reaper took the rows
        assert [r.recipient for r in reaper.leases.reap(14, "main")] == ["b@example.com"]
    assert states(postgres_url) == {"a@example.com": S.SENT, "b@example.com": S.UNKNOWN}


def test_the_sqlite_file_is_only_written_through_one_transaction_per_commit(
    tmp_path: Path,
) -> None:
    """A batch holds the write lock for one transaction: another writer waits for it once."""
    path = tmp_path / "outbox.sqlite3"
    with open_database(path) as database:
        a, b = claimed(database, "a@example.com", "b@example.com")
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        journal = database.journal(W)
        journal.mark(a.id, None)
        journal.mark(b.id, None)
        timer = threading.Timer(0.2, other.execute, ("COMMIT",))
        timer.start()
        assert journal.commit() == [True, True]  # waited for the lock, then wrote both
        timer.join()
        other.close()
    assert states(path) == {"a@example.com": S.SENDING, "b@example.com": S.SENDING}
