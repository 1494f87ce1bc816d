"""The settings and an open outbox in; click events older than `[privacy] retention_days`
deleted, a bounded batch at a time, out. One of the worker's duties (`newsletter worker`):
RetentionDuty runs `prune_clicks` on a connection of its own, again at once while there is more
to delete, else every PRUNE_EVERY seconds; each batch is its own short transaction, so a send
or `serve` writing beside it waits for one batch at most.

Per-reader data goes with its reader as well: `forget_reader` deletes every event that names
an outbox row of the address (what `newsletter subscribers forget` runs, with the rest of the
person's data).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

from newsletter.config.settings import Settings
from newsletter.database import Database, open_project_database
from newsletter.errors import DatabaseError

BATCH = 5000
DAY = 86_400.0
PRUNE_EVERY = 3600.0  # seconds between two rounds with nothing left to delete
FAULT_PAUSE = 60.0


class Pruned(NamedTuple):
    deleted: int
    done: bool  # False: `max_batches` ran out first; the next round goes on


def prune_clicks(
    database: Database,
    settings: Settings,
    *,
    now: float | None = None,
    batch: int = BATCH,
    max_batches: int = 20,
) -> Pruned:
    """Delete the events older than the retention window, oldest first, `batch` at a time, at
    most `max_batches` batches in this call."""
    cutoff = (time.time() if now is None else now) - settings.privacy.retention_days * DAY
    deleted = 0
    for _ in range(max_batches):
        found = database.clicks.delete_older(cutoff, limit=batch)
        deleted += found
        if found < batch:
            return Pruned(deleted, True)
    return Pruned(deleted, False)


def forget_reader(database: Database, address: str, lists: Iterable[str] | None = None) -> int:
    """Every click event of `address`'s outbox rows (on `lists`, or on all): how many."""
    return database.clicks.forget_reader(address, lists)


class RetentionDuty:
    """The worker's duty (start, run_once -> seconds until the next look, stop): the events
    past the window deleted as they age, on a connection opened for each round (a round runs
    off the event loop, on a thread of its own, and the connection is that thread's)."""

    name = "click retention"

    def __init__(self, settings: Settings, log: Callable[[str], None]) -> None:
        self.settings = settings
        self.log = log
        self.deleted = 0

    async def start(self) -> None:
        return None

    async def run_once(self) -> float:
        try:
            pruned = await asyncio.to_thread(self._round)
        except DatabaseError as exc:
            self.log(f"click retention: the outbox failed: {exc.message}")
            return FAULT_PAUSE
        self.deleted += pruned.deleted
        if pruned.deleted:
            days = self.settings.privacy.retention_days
            self.log(f"click retention: {pruned.deleted} event(s) older than {days} days deleted")
        return 0.0 if not pruned.done else PRUNE_EVERY

    async def stop(self) -> None:
        return None

    def _round(self) -> Pruned:
        with open_project_database(self.settings) as database:
            return prune_clicks(database, self.settings)
