"""What a database supplies the outbox: statements in, rows, row counts and commits out.

The stores (deliveries.py, plans.py, leases.py, suppressions.py, bounces.py, journal.py) write
their SQL once for both databases (`?` placeholders, ON CONFLICT, RETURNING) and run it through a
Backend: SQLite (sqlite.py) or PostgreSQL (postgres.py). A backend executes one statement
(committed at once outside a transaction), fetches rows, brackets writes in a transaction that
holds its write lock from the start, commits a batch of statements at once (the journal's
group commit; on PostgreSQL sent without waiting, a Landing to watch for its reply), sends a
send's claims the same way (`send_fetch`), names its clock, and applies the numbered migrations
of schema.py the database lacks when it opens. Every error of its driver reaches the caller as a
DatabaseError naming the cause (mapped by the backend, in one place each).

`durability` has the same meaning on both: "process" (a commit survives this process being
killed) or "power" (it survives a power cut: the commit waits for the disk).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal

from newsletter.database.records import now
from newsletter.database.schema import LATEST, MIGRATIONS, TRACKING, Migration, statements
from newsletter.errors import DatabaseError

Params = Sequence[Any]
Statement = tuple[str, Params]
Durability = Literal["process", "power"]


# `lower(column) LIKE ? ESCAPE '!'` with `mentions(text)`: the rows whose column holds `text`,
# in any case, on both databases (an erasure's search for an address in free text); the
# candidates are then read with `address_in`, since ann@example.org is also inside
# joann@example.org.
MENTIONS = "LIKE ? ESCAPE '!'"
# A migration's statement that adds a column: skipped when the column is there already, as a
# table's CREATE ... IF NOT EXISTS is (SQLite has no ADD COLUMN IF NOT EXISTS): a file whose
# schema_migrations lost rows it had applied (restored in part, rewritten by hand) migrates again.
_ADD_COLUMN = re.compile(r"^\s*ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)", re.IGNORECASE)
_ADDRESS_CHARS = r"A-Za-z0-9.!#$%&'*+/=?^_`{|}~\-"


def mentions(text: str) -> str:
    """The LIKE pattern of a column holding `text` (lower case) anywhere, its own % and _ taken
    as themselves."""
    escaped = text.lower().replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return f"%{escaped}%"


def address_in(key: str) -> re.Pattern[str]:
    """Where the address `key` stands in free text as a whole, in any case: not inside a longer
    address (joann@..., ann@example.org.evil); a full stop after it ends a sentence."""
    return re.compile(
        rf"(?<![{_ADDRESS_CHARS}]){re.escape(key)}(?![A-Za-z0-9-]|\.[A-Za-z0-9])", re.IGNORECASE
    )


def naming(backend: Backend, table: str, column: str, key: str, ident: str = "id") -> list[Any]:
    """The `ident` of every row of `table` whose free-text `column` names the address `key`
    (table, column and ident are the caller's constants)."""
    found = address_in(key)
    rows = backend.fetch(
        f"SELECT {ident}, {column} FROM {table} WHERE lower({column}) {MENTIONS}",
        (mentions(key),),
    )
    return [row[:-1] for row in rows if found.search(row[-1] or "")]


def is_postgres(target: Path | str) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


class Backend:
    """One connection to the outbox's database, and what the stores ask of it."""

    name = ""
    target: Path | str
    durability: Durability = "process"
    # How long a write waits for another program's write lock: SQLite's ([outbox] lock_wait);
    # PostgreSQL waits on its own terms (lock_timeout), so this is only carried along.
    lock_wait = 30.0
    # SQL for the database's clock in Unix seconds: leases are timed by the one clock every
    # worker shares, not by each machine's own.
    clock = ""
    # True where several workers may share a send (PostgreSQL): leases decide who is alive.
    # False for SQLite, where the send lock proves a run is alone on its (issue, list).
    shared = False
    # SQL after a claim's inner SELECT: PostgreSQL skips rows another worker is claiming.
    skip_locked = ""
    _depth = 0  # how many `transaction` blocks are open (the outer one owns the transaction)

    # -- what each backend implements ---------------------------------------------------------

    def run(self, sql: str, params: Params = ()) -> int:
        """Execute one statement (committed at once outside `transaction`); its row count."""
        raise NotImplementedError

    def fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def many(self, sql: str, rows: Iterable[Params]) -> None:
        """One statement for each of `rows`; inside `transaction` only."""
        raise NotImplementedError

    def commit(self, batch: Sequence[Statement]) -> list[list[tuple[Any, ...]]]:
        """Every statement of `batch` in one transaction, with one commit (and on PostgreSQL
        one round trip); the rows each returned. All of them or none: an error rolls the
        whole batch back. Never inside `transaction`."""
        raise NotImplementedError

    def _begin(self) -> AbstractContextManager[None]:
        """The backend's write transaction: its write lock taken at the start, committed at
        the end, rolled back if the block raises."""
        raise NotImplementedError

    def _migration_lock(self) -> AbstractContextManager[None]:
        """A transaction during which no other process applies migrations."""
        raise NotImplementedError

    def _script(self, migration: Migration) -> str:
        raise NotImplementedError

    def send_commit(self, batch: Sequence[Statement]) -> Landing:
        """`commit`, sent without waiting for its reply where the database is a server
        (PostgreSQL, on a connection of its own); here, committed before it returns. One at a
        time: the next is sent once this one has landed."""
        return Landing(rows=self.commit(batch))

    def send_fetch(self, sql: str, params: Params = ()) -> Landing:
        """`fetch` (one statement, committed alone), sent without waiting for its reply where
        the database is a server (PostgreSQL, on a connection of its own, not the commits');
        here, fetched before it returns. One at a time: the next is sent once this one has
        landed. A send's claims ahead of its sessions (leases.send_claim)."""
        return Landing(rows=[self.fetch(sql, params)])

    def lock_at_once(self, sql: str, params: Params = ()) -> bool:
        """Inside `transaction`: the rows of `sql` (a SELECT ... FOR UPDATE NOWAIT) locked, or
        False, with none of them held, if another transaction holds one."""
        raise NotImplementedError

    def try_lock(self, key: int) -> bool:
        """Take the lock `key` for this connection if no other connection holds it (it goes
        when this one does, a killed process's included); False if another does."""
        raise NotImplementedError

    def unlock(self, key: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def settle(self) -> bool:
        """What was deleted made unreadable on disk as far as the database allows (SQLite: the
        WAL checkpointed and truncated); whether it was done. PostgreSQL's dead row versions
        are its autovacuum's to reclaim: nothing to do here."""
        return True

    def reconnect(self) -> None:
        """Open the connection anew (after `close`), schema as it is."""
        raise NotImplementedError

    @property
    def broken(self) -> bool:
        """True once the database dropped the connection (a file never does): open anew."""
        return False

    @property
    def display(self) -> str:
        """Where the outbox is, safe to print (never a password)."""
        return str(self.target)

    # -- shared -------------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A transaction holding the write lock from its start, so two writers never
        interleave a read-then-write on the same rows. Nested use (a store's step inside
        another's transaction) joins the outer one."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        with self._begin():
            self._depth = 1
            try:
                yield
            finally:
                self._depth = 0

    def database_time(self) -> float:
        (moment,) = self.fetch(f"SELECT {self.clock}")[0]
        return float(moment)

    def version(self) -> int:
        """The schema version the database is at (0: an empty database)."""
        self.run(TRACKING[self.name])
        (found,) = self.fetch("SELECT coalesce(max(version), 0) FROM schema_migrations")[0]
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
                raise DatabaseError(
                    f"{self.display}: the outbox schema is at version {current}, newer than"
                    f" this newsletter knows ({LATEST})",
                    hint="Upgrade newsletter on this machine to the version the others run.",
                )
            for migration in MIGRATIONS:
                if migration.version <= current:
                    continue
                for statement in statements(self._script(migration)):
                    if not self._adds_a_column_there_already(statement):
                        self.run(statement)
                self.run(
                    "INSERT INTO schema_migrations (version, about, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.about, now()),
                )
                applied.append(migration)
        return applied

    def _adds_a_column_there_already(self, statement: str) -> bool:
        added = _ADD_COLUMN.match(statement)
        if added is None:
            return False
        table, column = added.group(1).lower(), added.group(2).lower()
        if self.name == "sqlite":
            found = [str(row[1]).lower() for row in self.fetch(f"PRAGMA table_info({table})")]
        else:
            found = [
                str(row[0]).lower()
                for row in self.fetch(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_schema = current_schema() AND table_name = ?",
                    (table,),
                )
            ]
        return column in found

    def _up_to_date(self) -> bool:
        try:
            found = self.fetch("SELECT max(version) FROM schema_migrations")
        except DatabaseError:  # no table yet
            return False
        return bool(found[0][0] == LATEST)


class Landing:
    """A commit on its way: `fileno` to watch for its reply (None: landed already), `ready`
    once it came, `rows` (each statement's) once ready, or `wait` for it."""

    fileno: int | None = None

    def __init__(self, rows: list[list[tuple[Any, ...]]] | None = None) -> None:
        self._rows = rows

    def ready(self) -> bool:
        """Whether the reply has come (reads what the socket holds); raises its DatabaseError."""
        return True

    def wait(self) -> list[list[tuple[Any, ...]]]:
        """The rows, once the reply has come (blocking until it does)."""
        return self.rows

    @property
    def rows(self) -> list[list[tuple[Any, ...]]]:
        assert self._rows is not None, "a commit's rows are read once it has landed"
        return self._rows
