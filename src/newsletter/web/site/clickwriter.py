"""Click events in, one at a time from the redirect endpoint; written to the outbox a batch at a
time, on its connection's thread, out.

The redirect never waits for a write: an event is queued and the queue written within
`interval` seconds, or at once when a batch is full, in one transaction. The queue is bounded
(`capacity`): a flood of requests costs events, never memory, and what was dropped is counted
and logged. A batch the outbox refuses (its disk full, the database gone) is logged and
dropped: click events are counts, and a retry could not tell a batch written from one lost.
`flush` writes what is left (at shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque

from newsletter.database.clicks import StoredClick
from newsletter.errors import NewsletterError
from newsletter.web.site.connection import DatabaseThread
from newsletter.web.site.guard import error_log

BATCH = 500
INTERVAL = 0.2  # seconds an event may wait for its batch
CAPACITY = 20_000
_WARN_EVERY = 60.0  # seconds between two warnings of dropped events


class ClickWriter:
    def __init__(
        self,
        database: DatabaseThread,
        *,
        batch: int = BATCH,
        interval: float = INTERVAL,
        capacity: int = CAPACITY,
    ) -> None:
        self.database = database
        self.batch = batch
        self.interval = interval
        self.capacity = capacity
        self.dropped = 0  # events never written: the queue full, or their batch refused
        self.written = 0
        self._queue: deque[StoredClick] = deque()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._warned = -_WARN_EVERY

    def add(self, click: StoredClick) -> None:
        """Queue `click` (from the event loop's thread)."""
        if len(self._queue) >= self.capacity:
            self._drop(1, "the queue of click events is full")
            return
        self._queue.append(click)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        elif len(self._queue) >= self.batch:
            self._wake.set()

    async def _run(self) -> None:
        while self._queue:
            self._wake.clear()
            if len(self._queue) < self.batch:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.interval)
            batch = [self._queue.popleft() for _ in range(min(self.batch, len(self._queue)))]
            await self._write(batch)

    async def _write(self, batch: list[StoredClick]) -> None:
        try:
            await self.database.run(lambda database: database.clicks.add(batch))
        except NewsletterError as exc:
            self._drop(len(batch), f"the outbox refused them: {exc.message}")
        else:
            self.written += len(batch)

    async def flush(self) -> None:
        """Write everything queued now."""
        if self._task is not None and not self._task.done():
            self._wake.set()
            await self._task
        while self._queue:
            await self._run()

    def flush_from_thread(self) -> None:
        """`flush` for a caller outside the event loop (serve's shutdown): what is left."""
        batch = list(self._queue)
        self._queue.clear()
        if not batch:
            return
        try:
            self.database.call(lambda database: database.clicks.add(batch))
        except NewsletterError as exc:
            self._drop(len(batch), f"the outbox refused them: {exc.message}")

    def _drop(self, count: int, why: str) -> None:
        self.dropped += count
        now = time.monotonic()
        if now - self._warned >= _WARN_EVERY:
            self._warned = now
            error_log.warning(
                "%d click event(s) not kept (%d in all): %s", count, self.dropped, why
            )
