"""The outbox in a SQLite file: a Path in, the Outbox interface out (the default backend).

WAL with synchronous=NORMAL: every commit survives a killed process (the case that matters for a
send someone interrupts); only a power loss may drop the last few commits. Writers serialise on
BEGIN IMMEDIATE; one machine only (a network share breaks SQLite's locks), and one send per
(issue, list) at a time, which the flock in the send lock guarantees.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from newsletter.errors import DeliveryError
from newsletter.outbox.base import Outbox
from newsletter.outbox.schema import Migration
from newsletter.outbox.store import Params


class SqliteOutbox(Outbox):
    backend = "sqlite"
    clock = "((julianday('now') - 2440587.5) * 86400.0)"
    errors = sqlite3.Error

    def __init__(self, target: Path | str, *, migrate: bool = True) -> None:
        path = Path(target)
        self.target = self.path = path
        self._depth = 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=30000")
            if migrate:
                self.migrate()
        except sqlite3.Error as exc:
            raise DeliveryError(
                f"{path}: cannot open the delivery log: {exc}",
                hint="Check that the state folder is writable and the file is a newsletter outbox.",
            ) from None

    def close(self) -> None:
        self._db.close()

    def _run(self, sql: str, params: Params = ()) -> int:
        return self._db.execute(sql, params).rowcount

    def _fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return self._db.execute(sql, params).fetchall()

    def _many(self, sql: str, rows: Iterable[Params]) -> None:
        self._db.executemany(sql, rows)

    @contextmanager
    def _write(self) -> Iterator[None]:
        # Nested use (a helper inside a transaction) joins the outer transaction.
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        # BEGIN IMMEDIATE takes the write lock up front.
        self._db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self._db.execute("ROLLBACK")
            raise
        self._depth = 0
        self._db.execute("COMMIT")

    def _migration_lock(self) -> AbstractContextManager[None]:
        return self._write()

    def _script(self, migration: Migration) -> str:
        return migration.sqlite
