"""The engine's commit step on both backends: what every session records in one turn of the
event loop is one commit; a mark is awaited until it is durable, an outcome joins the next
commit and is told once it is; a failed commit fails the marks waiting for it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest

from newsletter.database import Commit, Database, Delivery, open_database
from newsletter.errors import DatabaseError
from newsletter.models import DeliveryStatus as S
from newsletter.send.commit import DEFER, GroupCommit
from support.database import plan

W = "w1"


def claimed(database: Database, n: int) -> list[Delivery]:
    plan(database, 14, "main", [f"r{i}@example.com" for i in range(n)])
    database.leases.register(W, 14, "main", "host", 1, 30)
    return database.leases.claim(14, "main", W, 100, max_tries=5, at=time.time() + 1)


class Counted:
    """The outbox's journal, counting its commits."""

    def __init__(self, database: Database) -> None:
        self.journal = database.journal(W)
        self.commits: list[int] = []  # entries per commit
        send = self.journal.send

        def counted() -> Commit:
            self.commits.append(len(self.journal))
            return send()

        self.journal.send = counted  # type: ignore[method-assign]


async def landed(told: list[Any], n: int) -> None:
    """Until `n` outcomes were told (on PostgreSQL the reply comes while the loop runs)."""
    for _ in range(500):
        if len(told) >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(told)} of {n} outcomes told")


def committed(database: Database) -> list[S]:
    with open_database(database.target) as other:
        return [r.state for r in other.deliveries.rows(14, "main")]


async def test_the_sessions_of_one_turn_share_one_commit(database: Database) -> None:
    rows = claimed(database, 4)
    counted = Counted(database)
    faults: list[DatabaseError] = []
    commit = GroupCommit(counted.journal, faults.append)
    told: list[tuple[int, bool]] = []
    # In one turn of the loop row 0's outcome comes in and three sessions reach DATA's 354.

    async def outcome() -> bool:
        commit.record(rows[0].id, S.SENT, lambda ok: told.append((rows[0].id, ok)), code=250)
        assert told == []  # not before its commit
        return True

    sessions = [commit.mark(r.id, f"<{r.id}@x>") for r in rows[1:]]
    assert await asyncio.gather(outcome(), *sessions) == [True, True, True, True]
    assert counted.commits == [4]  # one commit carried the outcome and the three marks
    assert told == [(rows[0].id, True)]
    assert committed(database) == [S.SENT, S.SENDING, S.SENDING, S.SENDING]
    # An outcome alone is committed a turn later (nothing more came), without anyone waiting.
    commit.record(rows[1].id, S.DEFERRED, lambda ok: told.append((rows[1].id, ok)), code=451)
    assert committed(database)[1] == S.SENDING
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert counted.commits == [4, 1]  # sent
    await landed(told, 2)
    assert told[1] == (rows[1].id, True)
    assert committed(database)[1] == S.DEFERRED
    assert faults == []


async def test_a_commit_waits_a_few_turns_while_entries_keep_coming(database: Database) -> None:
    """While every turn of the loop brings more entries, the commit waits for them, up to
    DEFER turns; a turn that brings none commits at once."""
    rows = claimed(database, DEFER + 3)
    counted = Counted(database)
    commit = GroupCommit(counted.journal, lambda exc: None)
    for row in rows:  # an outcome every turn, for longer than a commit waits
        commit.record(row.id, S.SENT, lambda ok: None, code=250)
        await asyncio.sleep(0)
    assert counted.commits == [DEFER + 1]  # sent (and on SQLite landed) as the last came
    commit.flush()  # the end of the run: the rest, landed
    assert counted.commits == [DEFER + 1, len(rows) - DEFER - 1]
    assert committed(database) == [S.SENT] * len(rows)


async def test_a_row_that_is_no_longer_this_workers_is_refused(database: Database) -> None:
    (row,) = claimed(database, 1)
    database.deliveries.recover(14, "main")  # another run took the send over: no owner now
    commit = GroupCommit(database.journal(W), lambda exc: None)
    told: list[bool] = []
    assert await commit.mark(row.id, "<a@x>") is False
    commit.record(row.id, S.SENT, told.append)
    commit.flush()
    assert told == [False]
    assert committed(database) == [S.PENDING]


async def test_a_failed_commit_fails_its_marks_and_is_reported_once(database: Database) -> None:
    rows = claimed(database, 2)
    faults: list[DatabaseError] = []
    commit = GroupCommit(database.journal(W), faults.append)
    told: list[bool] = []
    commit.record(rows[0].id, S.SENT, told.append)
    database.close()  # the log gone under the run (a lost connection, a closed file)
    with pytest.raises(DatabaseError):
        await commit.mark(rows[1].id, "<b@x>")
    assert len(faults) == 1
    assert told == []  # never committed: the row stays `sending` for the next run to judge
    database.backend.reconnect()
    assert committed(database) == [S.PENDING, S.PENDING]


async def test_a_mark_whose_session_was_cancelled_is_still_committed_in_order(
    database: Database,
) -> None:
    """A session abandoned while its mark waits: the mark is still committed with the others
    (the engine then records the row deferred behind it, in the same or the next commit)."""
    rows = claimed(database, 2)
    commit = GroupCommit(database.journal(W), lambda exc: None)
    waiting: Any = asyncio.ensure_future(commit.mark(rows[0].id, "<a@x>"))
    await asyncio.sleep(0)  # the mark is queued, its commit scheduled
    waiting.cancel()
    assert await commit.mark(rows[1].id, "<b@x>") is True
    assert waiting.cancelled()
    assert committed(database) == [S.SENDING, S.SENDING]


async def test_on_postgres_the_loop_goes_on_while_a_commit_is_on_its_way(
    postgres_url: str,
) -> None:
    """The commit goes out on a connection of its own and the loop is not blocked while the
    server works on it; its marks are told only once it has landed (durable), and what comes
    meanwhile waits for the next commit, sent after it (one on its way at a time)."""
    with open_database(postgres_url) as database, psycopg.connect(postgres_url) as holder:
        a, b = claimed(database, 2)
        counted = Counted(database)
        commit = GroupCommit(counted.journal, lambda exc: None)
        # Another transaction holds row a: the server cannot finish the commit until it ends.
        holder.execute("SELECT id FROM deliveries WHERE id = %s FOR UPDATE", (a.id,))
        first = asyncio.ensure_future(commit.mark(a.id, "<a@x>"))
        await asyncio.sleep(0.3)  # the loop runs on
        assert counted.commits == [1]
        assert not first.done()
        assert database.deliveries.counts(14, "main")[S.PENDING] == 2  # its other connection
        second = asyncio.ensure_future(commit.mark(b.id, "<b@x>"))
        await asyncio.sleep(0.1)
        assert counted.commits == [1]  # the second waits for the first to land
        assert not second.done()
        assert committed(database) == [S.PENDING, S.PENDING]
        holder.rollback()
        assert await asyncio.wait_for(first, 5) is True
        assert await asyncio.wait_for(second, 5) is True
        assert counted.commits == [1, 1]
        assert committed(database) == [S.SENDING, S.SENDING]
