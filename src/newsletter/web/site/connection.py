"""The server's one outbox connection, kept open on a thread of its own: an action in, its result
out.

Opening the outbox for every request costs a TCP connection and an authentication per click on
PostgreSQL. `serve` keeps one connection per process instead, on one thread: a SQLite connection
belongs to the thread that opened it, and a psycopg connection must not be used by two threads
at once, so every request's statements run on that thread, one action after the other (each is
one or two short statements). A connection the database dropped (a restart, a failover, an
administrator's pg_terminate_backend) is replaced, and the action that found it dropped runs
again on the new one: the actions of `serve` may run twice (add a suppression if absent, read
one, undo one).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from newsletter.database import Database, Durability, open_database

T = TypeVar("T")


class DatabaseThread:
    """The outbox at `target`, opened on first use and reopened after a lost connection."""

    def __init__(
        self, target: Path | str, durability: Durability = "process", lock_wait: float = 30.0
    ) -> None:
        self._target = target
        self._durability: Durability = durability
        self._lock_wait = lock_wait
        self._database: Database | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="outbox")
        # An app dropped without close() (a test's) must not leave its thread behind.
        weakref.finalize(self, self._thread.shutdown, wait=False)

    async def run(self, action: Callable[[Database], T]) -> T:
        """`action` on the connection, on its thread; what it returns or raises."""
        return await asyncio.wrap_future(self._thread.submit(self._call, action))

    def call(self, action: Callable[[Database], T]) -> T:
        """`run` for a caller on another thread that may block (never the outbox's own)."""
        return self._thread.submit(self._call, action).result()

    def open(self) -> None:
        """Connect now: a database that cannot be reached fails `serve` at start, not a click."""
        self._thread.submit(self._open).result()

    def close(self) -> None:
        self._thread.submit(self._drop).result()
        self._thread.shutdown()

    def _call(self, action: Callable[[Database], T]) -> T:
        database = self._open()
        try:
            return action(database)
        except Exception:
            if not database.broken:
                raise
        # The connection was lost, not the action at fault: once more, on a new one.
        self._drop()
        return action(self._open())

    def _open(self) -> Database:
        if self._database is None:
            self._database = open_database(
                self._target, durability=self._durability, lock_wait=self._lock_wait
            )
        return self._database

    def _drop(self) -> None:
        database, self._database = self._database, None
        if database is not None:
            with contextlib.suppress(Exception):  # a lost connection may fail to close
                database.close()
