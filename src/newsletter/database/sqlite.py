"""The outbox in a SQLite file: a Path in, a Backend out (the default).

WAL, with `synchronous` set by the durability: NORMAL for "process" (every commit survives a
killed process; a power cut may drop the last few) and FULL for "power" (each commit waits for
the WAL to reach the disk). Writers serialise on BEGIN IMMEDIATE; one machine only (a network
share breaks SQLite's locks), and one send per (issue, list) at a time, which the flock of the
send lock guarantees (so `try_lock` has nothing left to exclude).

A writer that finds the lock taken (worker processes of one send, `serve` beside a send) tries
again after 0.1 ms, doubling up to 5 ms, for up to 30 s: SQLite's own busy handler sleeps a whole
millisecond at the first conflict, while a commit here holds the lock for far less, and the
sleeper blocks its whole event loop meanwhile.

Every sqlite3 error a statement raises once the file is open becomes an DatabaseError here
(`_fault`), by SQLite's result code: the disk full, the lock held past the wait, a damaged
file, an I/O error, a read-only file.

Every connection has `secure_delete` on, and an erasure ends with a checkpoint that truncates the
WAL (`settle`): what a person's erasure deleted is not left readable in the file's free pages or
in the WAL while `serve` or the worker holds the file open.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from newsletter.database.backend import Backend, Durability, Params, Statement
from newsletter.database.schema import Migration
from newsletter.errors import DatabaseError, display_path
from newsletter.state.statefiles import private_file, private_folder

BUSY_TIMEOUT = 30.0  # [outbox] lock_wait's default
SETTLE_WAIT = 10.0


class SqliteBackend(Backend):
    name = "sqlite"
    clock = "((julianday('now') - 2440587.5) * 86400.0)"

    _locked_out = False  # the last wait for the write lock ran out

    def __init__(
        self,
        target: Path | str,
        *,
        durability: Durability = "process",
        migrate: bool = True,
        lock_wait: float = BUSY_TIMEOUT,
    ) -> None:
        path = Path(target)
        self.target = self.path = path
        self.durability = durability
        self.lock_wait = lock_wait  # how long a write waits for another program's lock
        self._db = self._connect()
        try:
            if migrate:
                self.migrate()
            self._db.execute("PRAGMA busy_timeout=0")  # from now on, _execute waits
        except BaseException:
            self._db.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        synchronous = "FULL" if self.durability == "power" else "NORMAL"
        try:
            # Private whatever the umask: SQLite gives the -wal and -shm the file's mode.
            private_folder(self.path.parent, tighten=False)
            private_file(self.path)
            for companion in ("-wal", "-shm"):
                if (found := self.path.with_name(self.path.name + companion)).exists():
                    private_file(found)
            # One thread at a time uses a connection, not always the one that opened it (a
            # test's send runs on its own thread).
            db = sqlite3.connect(
                self.path, timeout=self.lock_wait, isolation_level=None, check_same_thread=False
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={synchronous}")
            # Deleted rows zeroed where they lay, not left readable in free space: an erasure
            # (forgetting.py) must leave no copy of the person in the file (see `settle`).
            db.execute("PRAGMA secure_delete=ON")
        except (sqlite3.Error, OSError) as exc:
            raise DatabaseError(
                f"{self.path}: cannot open the delivery log: {exc}",
                hint="Check that the state folder is writable and has free space, and that the"
                " file is a newsletter outbox.",
            ) from None
        return db

    def reconnect(self) -> None:
        self._db = self._connect()
        self._db.execute("PRAGMA busy_timeout=0")

    def close(self) -> None:
        self._db.close()

    def settle(self) -> bool:
        """Every committed page written back into the database file and the WAL truncated to
        nothing: an erasure's old pages (which still hold the person) stay in the WAL until a
        checkpoint resets it, and `serve` or the worker holding the file open never lets the
        last connection's close do it. A reader in the middle of a transaction keeps the
        checkpoint from finishing: tried again for up to SETTLE_WAIT seconds. Whether it
        finished."""
        deadline = time.monotonic() + SETTLE_WAIT
        while True:
            try:
                busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.Error as exc:
                raise self._fault(exc) from exc
            if not busy:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def run(self, sql: str, params: Params = ()) -> int:
        try:
            return self._execute(sql, params).rowcount
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc

    def fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        try:
            return self._execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc

    def many(self, sql: str, rows: Iterable[Params]) -> None:
        # Inside a transaction only (the lock is held): a retry would find `rows` consumed.
        try:
            self._db.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc

    def commit(self, batch: Sequence[Statement]) -> list[list[tuple[Any, ...]]]:
        if len(batch) == 1:  # a statement alone is its own transaction
            ((sql, params),) = batch
            return [self.fetch(sql, params)]
        with self._begin():
            try:
                return [self._db.execute(sql, params).fetchall() for sql, params in batch]
            except sqlite3.Error as exc:
                raise self._fault(exc) from exc

    def lock_at_once(self, sql: str, params: Params = ()) -> bool:
        return True  # the transaction holds the whole file's write lock already

    def try_lock(self, key: int) -> bool:
        return True  # the send lock's flock already excludes every other send of (issue, list)

    def unlock(self, key: int) -> None:
        pass

    def _execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        """`sql` run, again while another connection holds the write lock (a statement refused
        as busy did nothing, so running it again is safe), for up to `lock_wait`. Once a wait
        ran out, the next conflicts fail at once until a statement gets through: a run stopping
        on the lock does not wait that long again for each write on its way out."""
        try:
            cursor = self._db.execute(sql, params)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or self._locked_out:
                raise
        else:
            self._locked_out = False
            return cursor
        deadline = time.monotonic() + self.lock_wait
        pause = 0.0001
        while True:
            time.sleep(pause)
            try:
                cursor = self._db.execute(sql, params)
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY:
                    raise
                if time.monotonic() > deadline:
                    self._locked_out = True
                    raise
            else:
                return cursor
            pause = min(pause * 2, 0.005)

    @contextmanager
    def _begin(self) -> Iterator[None]:
        # BEGIN IMMEDIATE takes the write lock up front.
        try:
            self._execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._fault(exc) from exc
        try:
            yield
        except BaseException:
            self._roll_back()
            raise
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._roll_back()
            raise self._fault(exc) from exc

    def _roll_back(self) -> None:
        # SQLite may have rolled back already (a full disk, an I/O error), and the fault that
        # got us here is the one to report, not a failed ROLLBACK.
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")

    def _fault(self, exc: sqlite3.Error) -> DatabaseError:
        """The DatabaseError that names what `exc` means for the delivery log, and the fix."""
        where = display_path(self.path)
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        if code == sqlite3.SQLITE_FULL:
            return DatabaseError(
                f"{where}: the disk is full: the delivery log cannot grow",
                hint="Free space on the disk that holds it, then re-run the same command to"
                " resume.",
            )
        if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return DatabaseError(
                f"{where}: the delivery log stayed locked by another program for"
                f" {self.lock_wait:g} s",
                hint="Something holds a write transaction open on it (a sqlite3 shell, a backup"
                " tool, a stuck newsletter command): end it, then re-run the same command.",
            )
        if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return DatabaseError(
                f"{where}: the delivery log is damaged ({exc})",
                hint="Stop every newsletter command using it and keep a copy of the file; then"
                " restore a backup, or rebuild it (`sqlite3 FILE .recover | sqlite3 NEW`) and"
                " check `newsletter status` before sending: rows the damage lost would be"
                " sent again.",
            )
        if code == sqlite3.SQLITE_IOERR:
            return DatabaseError(
                f"{where}: cannot read or write the delivery log ({exc})",
                hint="Check the disk that holds it (dmesg, free space), then re-run the same"
                " command to resume.",
            )
        if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_CANTOPEN):
            return DatabaseError(
                f"{where}: the delivery log cannot be written ({exc})",
                hint="Make the file and its folder writable by this user, then re-run the same"
                " command to resume.",
            )
        return DatabaseError(f"{where}: the delivery log failed: {exc}")

    def _migration_lock(self) -> AbstractContextManager[None]:
        return self.transaction()

    def _script(self, migration: Migration) -> str:
        return migration.sqlite
