"""The outbox in a SQLite file: a Path in, the Outbox interface out (the default backend).

WAL with synchronous=NORMAL: every commit survives a killed process (the case that matters for a
send someone interrupts); only a power loss may drop the last few commits. A send's outcomes
are written held (`_run_held`): they share the commit of the next `sending` mark, usually the
same session's next message a few microseconds later, or the engine's release at the end of
the event loop's turn; a commit costs more than the statements it carries. Writers serialise on
BEGIN IMMEDIATE; one machine only (a network share breaks SQLite's locks), and one send per
(issue, list) at a time, which the flock in the send lock guarantees.

A writer that finds the lock taken (worker processes of one send, `serve` beside a send) tries
again after 0.1 ms, doubling up to 5 ms, for up to 30 s: SQLite's own busy handler sleeps a whole
millisecond at the first conflict, while a commit here holds the lock for some 30 µs, and the
sleeper blocks its whole event loop meanwhile.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from newsletter.errors import DeliveryError
from newsletter.outbox.base import Outbox
from newsletter.outbox.schema import Migration
from newsletter.outbox.store import Params

T = TypeVar("T")
BUSY_TIMEOUT = 30.0


class SqliteOutbox(Outbox):
    backend = "sqlite"
    clock = "((julianday('now') - 2440587.5) * 86400.0)"
    errors = sqlite3.Error

    _held = False  # a transaction `_run_held` began is open

    def __init__(self, target: Path | str, *, migrate: bool = True) -> None:
        path = Path(target)
        self.target = self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            if migrate:
                self.migrate()
            self._db.execute("PRAGMA busy_timeout=0")  # from now on, _retried waits
        except sqlite3.Error as exc:
            raise DeliveryError(
                f"{path}: cannot open the delivery log: {exc}",
                hint="Check that the state folder is writable and the file is a newsletter outbox.",
            ) from None

    def close(self) -> None:
        self.release()
        self._db.close()

    def _run(self, sql: str, params: Params = ()) -> int:
        count = _retried(self._db.execute, sql, params).rowcount
        self._settle()
        return count

    def _run_held(self, sql: str, params: Params = ()) -> int:
        # Inside `_write` the block's transaction commits it; outside, one is begun (taking
        # the write lock, so nothing else can be busy) and left open.
        if not self._held and not self._depth:
            _retried(self._db.execute, "BEGIN IMMEDIATE", ())
            self._held = True
        return self._db.execute(sql, params).rowcount

    def release(self) -> None:
        if self._held:
            self._held = False
            self._db.execute("COMMIT")

    def _fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        rows = _retried(self._db.execute, sql, params).fetchall()
        self._settle()
        return rows

    def _settle(self) -> None:
        # A statement outside `_write` commits at once (a claim's UPDATE ... RETURNING comes
        # through _fetch), and with it whatever `_run_held` left open.
        if self._held and not self._depth:
            self.release()

    def _many(self, sql: str, rows: Iterable[Params]) -> None:
        # Inside _write only (the lock is held): a retry would find `rows` consumed.
        self._db.executemany(sql, rows)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # BEGIN IMMEDIATE takes the write lock up front.
        _retried(self._db.execute, "BEGIN IMMEDIATE", ())
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _migration_lock(self) -> AbstractContextManager[None]:
        return self._write()

    def _script(self, migration: Migration) -> str:
        return migration.sqlite


def _retried(call: Callable[[str, Params], T], sql: str, params: Params) -> T:
    """`call(sql, params)`, again while another connection holds the write lock. A statement
    refused as busy did nothing, so running it again is safe."""
    try:
        return call(sql, params)
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY:
            raise
    deadline = time.monotonic() + BUSY_TIMEOUT
    pause = 0.0001
    while True:
        time.sleep(pause)
        try:
            return call(sql, params)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
        pause = min(pause * 2, 0.005)
