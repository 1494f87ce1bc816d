"""What each backend supplies, and the schema kept up to date through it: a connection in,
statements, transactions and migrations out.

The SQL of the outbox is written once for both backends (`?` placeholders, ON CONFLICT,
RETURNING); a backend (sqlite.py, postgres.py) runs it, brackets writes in a transaction that
holds its write lock from the start, and names its clock. `migrate` applies the numbered
migrations of py the database lacks; every backend runs it when it opens.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from newsletter.errors import DeliveryError, OutboxError
from newsletter.outbox.records import now
from newsletter.outbox.schema import LATEST, MIGRATIONS, TRACKING, Migration, statements

Params = Sequence[Any]


def is_postgres(target: Path | str) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


class Store:
    backend = ""
    target: Path | str
    # The SQLite file (what worker processes reopen); a PostgreSQL outbox has none.
    path: Path
    # SQL for the database's clock in Unix seconds: leases are timed by the one clock every
    # worker shares, not by each machine's own.
    clock = ""
    # True where several workers may share a send (PostgreSQL): leases decide who is alive.
    # False for SQLite, where the send lock proves a run is alone.
    shared = False
    # The driver's own error class (sqlite3.Error, psycopg.Error): every one a statement raises
    # reaches the caller as an OutboxError, mapped by the backend.
    errors: type[Exception] = Exception
    _depth = 0  # how many `_write` blocks are open (the outer one owns the transaction)

    def close(self) -> None:
        raise NotImplementedError

    def _reconnect(self) -> None:
        """Open the connection anew (after `close`), schema as it is."""
        raise NotImplementedError

    @contextmanager
    def disconnected(self) -> Iterator[None]:
        """The connection closed for the block and opened again after it: for a process that
        forks children which open the outbox themselves. A SQLite connection open across fork
        leaves the child SQLite's record of the parent's locks and of the file's shared
        memory, on descriptors that are not the child's: the child's locks would then miss
        the parent's, and two writers could write at once."""
        self.close()
        try:
            yield
        finally:
            self._reconnect()

    @property
    def broken(self) -> bool:
        """True once the database dropped the connection (a file never does): open anew."""
        return False

    def _run(self, sql: str, params: Params = ()) -> int:
        """Execute one statement (committed at once outside `_write`, and with it whatever
        `_run_held` left open); its row count."""
        raise NotImplementedError

    def _run_held(self, sql: str, params: Params = ()) -> int:
        """Execute one statement whose commit may wait: for the next statement outside a
        `_write` (a read too), the next `_write`, or `release()`. Where a commit is cheap to
        share (SQLite, where a send commits twice per message) it is shared; elsewhere it
        commits at once."""
        return self._run(sql, params)

    def release(self) -> None:
        """Commit what `_run_held` left open, if anything."""

    def _fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _many(self, sql: str, rows: Iterable[Params]) -> None:
        raise NotImplementedError

    @contextmanager
    def _write(self) -> Iterator[None]:
        """A transaction holding the write lock from its start, so two senders never
        interleave a read-then-write on the same rows. Nested use (a helper inside a
        transaction) joins the outer one."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self.release()  # held writes commit first: a failing block must not roll them back
        with self._transaction():
            self._depth = 1
            try:
                yield
            finally:
                self._depth = 0

    def _transaction(self) -> AbstractContextManager[None]:
        """The backend's write transaction: its write lock taken at the start, committed at
        the end, rolled back if the block raises."""
        raise NotImplementedError

    def _migration_lock(self) -> AbstractContextManager[None]:
        """A transaction during which no other process applies migrations."""
        raise NotImplementedError

    def _script(self, migration: Migration) -> str:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if et is None:
            self.close()
            return
        # Leaving on an error (a full disk, a lost connection): that error is the one to
        # report, not closing's own failure to commit on the same disk or connection.
        with suppress(OutboxError):
            self.close()

    @property
    def display(self) -> str:
        """Where the outbox is, safe to print (never a password)."""
        return str(self.target)

    def version(self) -> int:
        """The schema version the database is at (0: an empty database)."""
        self._run(TRACKING[self.backend])
        (found,) = self._fetch("SELECT coalesce(max(version), 0) FROM schema_migrations")[0]
        return int(found)

    def migrate(self) -> list[Migration]:
        """Apply every migration the database lacks, in one transaction; the ones applied.
        Refuses a database written by a newer version of newsletter."""
        if self._up_to_date():
            return []  # the common case, without taking the migration lock
        applied = []
        with self._migration_lock():
            current = self.version()
            if current > LATEST:
                raise DeliveryError(
                    f"{self.display}: the outbox schema is at version {current}, newer than"
                    f" this newsletter knows ({LATEST})",
                    hint="Upgrade newsletter on this machine to the version the others run.",
                )
            for migration in MIGRATIONS:
                if migration.version <= current:
                    continue
                for statement in statements(self._script(migration)):
                    self._run(statement)
                self._run(
                    "INSERT INTO schema_migrations (version, about, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.about, now()),
                )
                applied.append(migration)
        return applied

    def _up_to_date(self) -> bool:
        try:
            found = self._fetch("SELECT max(version) FROM schema_migrations")
        except OutboxError:  # no table yet
            return False
        return bool(found[0][0] == LATEST)

    def database_time(self) -> float:
        (moment,) = self._fetch(f"SELECT {self.clock}")[0]
        return float(moment)
