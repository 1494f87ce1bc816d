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
once a turn brings none, nothing is gained by waiting. It is written in the event loop's
thread: a commit on a thread of its own measured slower on both backends (the thread waits for
the interpreter's lock the loop holds), see README, Benchmarks.

A commit that fails (the disk full, the connection lost) fails the marks waiting for it, is
handed to `on_fault`, and leaves its rows as a crash would: `sending` rows stay in doubt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from newsletter.errors import OutboxError
from newsletter.models import DeliveryStatus
from newsletter.outbox import Journal

Then = Callable[[bool], None]
Waiter = asyncio.Future[bool] | Then
# Turns of the event loop a commit may wait while each brings more entries.
DEFER = 3


class GroupCommit:
    def __init__(self, journal: Journal, on_fault: Callable[[OutboxError], None]) -> None:
        self.journal = journal
        self.on_fault = on_fault
        # What waits for the next commit, in the journal's order: a mark's future or an
        # outcome's callback.
        self._waiting: list[Waiter] = []
        self._scheduled = False  # a look at the end of this turn
        self._seen = 0  # entries the last look found
        self._deferred = 0  # turns the next commit has waited

    async def mark(self, row_id: int, message_id: str | None) -> bool:
        """The row's `sending` mark, committed: True, or False if the row is no longer this
        worker's (its body must not go out). Raises the commit's OutboxError."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.journal.mark(row_id, message_id)
        self._wait(future)
        return await future

    def record(
        self,
        row_id: int,
        state: DeliveryStatus,
        then: Then,
        *,
        code: int | None = None,
        reply: str = "",
        next_attempt_at: float = 0.0,
        attempted: bool = False,
    ) -> None:
        """An outcome, in the next commit; `then(written)` once it is committed."""
        self.journal.record(
            row_id,
            state,
            code=code,
            reply=reply,
            next_attempt_at=next_attempt_at,
            attempted=attempted,
        )
        self._wait(then)

    def _wait(self, waiter: Waiter) -> None:
        self._waiting.append(waiter)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._end_of_turn)

    def _end_of_turn(self) -> None:
        self._scheduled = False
        if len(self._waiting) > self._seen and self._deferred < DEFER:
            self._seen = len(self._waiting)
            self._deferred += 1
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._end_of_turn)
            return
        self.flush()

    def flush(self) -> None:
        """Commit what is queued, now (and at the end of a run)."""
        self._seen = self._deferred = 0
        waiting, self._waiting = self._waiting, []
        if not waiting:
            return
        try:
            written = self.journal.commit()
        except OutboxError as exc:
            for waiter in waiting:
                if isinstance(waiter, asyncio.Future) and not waiter.done():
                    waiter.set_exception(exc)
            self.on_fault(exc)
            return
        for waiter, ok in zip(waiting, written, strict=True):
            if isinstance(waiter, asyncio.Future):
                if not waiter.done():  # its session may have been cancelled meanwhile
                    waiter.set_result(ok)
            else:
                waiter(ok)
