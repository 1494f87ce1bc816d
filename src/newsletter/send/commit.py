"""The commit step of a send, owned by the engine: marks and outcomes in, awaited commits out.

Every `sending` mark and outcome this worker's sessions record goes into the next commit, one
transaction (outbox/journal.py) for however many sessions took part: a group commit. A session
that reached DATA's 354 waits for its mark's commit before its body goes out; an outcome does
not wait, and is committed with the next mark or before it. So the journal's rule holds for
the whole worker: no body goes out before its mark is durable, nor before every outcome
recorded ahead of it is. An outcome is told to the engine (`then`) once it is committed, or
refused because the row is no longer this worker's.

When: at the end of a turn of the event loop in which entries came, unless more came in that
turn, then up to DEFER turns later. A commit costs more than the entries it carries (a round
trip and a statement on PostgreSQL, page writes on SQLite, a disk flush with durability
"power"), so while the sessions keep bringing entries, a few more turns of them share one;
once a turn brings none, nothing is gained by waiting. On PostgreSQL the commit goes out on a
connection of its own and the loop goes on while the server works on it (its socket is watched
for the reply): the sessions keep uploading bodies whose marks are committed already, and what
they record meanwhile goes into the next commit, sent as soon as this one has landed. One
commit is on its way at a time, so they land in the journal's order. On SQLite the commit is
written in the event loop's thread: on a thread of its own it measured slower (the thread waits
for the interpreter's lock the loop holds), see docs/benchmarks.md.

A commit that fails (the disk full, the connection lost) fails the marks waiting for it, is
handed to `on_fault`, and leaves its rows as a crash would: `sending` rows stay in doubt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from newsletter.database import Commit, Journal
from newsletter.errors import DatabaseError
from newsletter.models import DeliveryStatus

Then = Callable[[bool], None]
Waiter = asyncio.Future[bool] | Then
# Turns of the event loop a commit may wait while each brings more entries.
DEFER = 3


class GroupCommit:
    def __init__(self, journal: Journal, on_fault: Callable[[DatabaseError], None]) -> None:
        self.journal = journal
        self.on_fault = on_fault
        # What waits for the next commit, in the journal's order: a mark's future or an
        # outcome's callback.
        self._waiting: list[Waiter] = []
        self._scheduled = False  # a look at the end of this turn
        self._seen = 0  # entries the last look found
        self._deferred = 0  # turns the next commit has waited
        # The commit on its way (PostgreSQL), what waits for it, and the socket its reply
        # comes on; the next is sent once it has landed.
        self._landing: tuple[Commit, list[Waiter], int] | None = None

    @property
    def busy(self) -> bool:
        """Entries wait for a commit, or one is on its way: their rows are not free yet."""
        return bool(self._waiting) or self._landing is not None

    async def mark(self, row_id: int, message_id: str | None, relay: str = "") -> bool:
        """The row's `sending` mark, committed: True, or False if the row is no longer this
        worker's (its body must not go out). Raises the commit's DatabaseError."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.journal.mark(row_id, message_id, relay)
        self._wait(future)
        return await future

    def record(
        self,
        row_id: int,
        state: DeliveryStatus,
        then: Waiter,
        *,
        code: int | None = None,
        reply: str = "",
        next_attempt_at: float = 0.0,
        attempted: bool = False,
        relay: str = "",
        counted: bool = True,
    ) -> None:
        """An outcome, in the next commit; `then(written)` once it is committed (or `then`'s
        result set, a future's: its exception if the commit failed)."""
        self.journal.record(
            row_id,
            state,
            code=code,
            reply=reply,
            next_attempt_at=next_attempt_at,
            attempted=attempted,
            relay=relay,
            counted=counted,
        )
        self._wait(then)

    def _wait(self, waiter: Waiter) -> None:
        self._waiting.append(waiter)
        if not self._scheduled and self._landing is None:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._end_of_turn)

    def _end_of_turn(self) -> None:
        self._scheduled = False
        if self._landing is not None:  # its landing sends the next
            return
        if len(self._waiting) > self._seen and self._deferred < DEFER:
            self._seen = len(self._waiting)
            self._deferred += 1
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._end_of_turn)
            return
        self._send()

    def flush(self) -> None:
        """Commit what is queued and wait for it to land (the end of a run)."""
        self._settle()
        self._send()
        self._settle()

    def _send(self) -> None:
        self._seen = self._deferred = 0
        waiting, self._waiting = self._waiting, []
        if not waiting:
            return
        try:
            commit = self.journal.send()
        except DatabaseError as exc:
            self._fail(waiting, exc)
            return
        fileno = commit.landing.fileno
        if fileno is None:  # landed already (SQLite)
            self._land(commit, waiting)
            return
        self._landing = (commit, waiting, fileno)
        asyncio.get_running_loop().add_reader(fileno, self._readable)

    def _readable(self) -> None:
        assert self._landing is not None
        commit, waiting, _ = self._landing
        try:
            if not commit.landing.ready():
                return
        except DatabaseError as exc:
            self._unwatch()
            self._fail(waiting, exc)
            return
        self._unwatch()
        self._land(commit, waiting)
        if self._waiting and not self._scheduled:  # what came while it was on its way
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._end_of_turn)

    def _settle(self) -> None:
        """The commit on its way, waited for."""
        if self._landing is None:
            return
        commit, waiting, _ = self._landing
        self._unwatch()
        try:
            commit.landing.wait()
        except DatabaseError as exc:
            self._fail(waiting, exc)
            return
        self._land(commit, waiting)

    def _unwatch(self) -> None:
        assert self._landing is not None
        asyncio.get_running_loop().remove_reader(self._landing[2])
        self._landing = None

    def _fail(self, waiting: list[Waiter], exc: DatabaseError) -> None:
        for waiter in waiting:
            if isinstance(waiter, asyncio.Future) and not waiter.done():
                waiter.set_exception(exc)
        self.on_fault(exc)

    def _land(self, commit: Commit, waiting: list[Waiter]) -> None:
        for waiter, ok in zip(waiting, commit.written(), strict=True):
            if isinstance(waiter, asyncio.Future):
                if not waiter.done():  # its session may have been cancelled meanwhile
                    waiter.set_result(ok)
            else:
                waiter(ok)
