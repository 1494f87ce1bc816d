"""The outbox in PostgreSQL through psycopg 3: a `postgresql://` URL in, the Outbox interface out.

Many machines share one database: each statement outside a transaction commits at once
(autocommit), and a write transaction serialises with the others on a transaction-level advisory
lock, the same guarantee SQLite's BEGIN IMMEDIATE gives on one machine. The password comes from
the URL in the environment (NEWSLETTER_OUTBOX__URL), PGPASSWORD or ~/.pgpass, never the config
file, and is never printed.

Every psycopg error a statement raises once connected becomes an OutboxError here (`_fault`): the
connection lost (a restart, a failover, pg_terminate_backend), the server's disk full, a
read-only standby, a missing privilege, a cancelled statement, damaged data.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any

import psycopg
from psycopg import errors as pg

from newsletter.dburl import redact, scrub
from newsletter.errors import DeliveryError, OutboxError
from newsletter.outbox.base import Outbox
from newsletter.outbox.schema import Migration
from newsletter.outbox.store import Params

# Advisory lock keys (one 64-bit number each, shared by every newsletter on the database).
WRITE_LOCK = 0x6E6C_0001
MIGRATION_LOCK = 0x6E6C_0002


@functools.lru_cache(maxsize=256)
def _sql(query: str) -> str:
    """The shared `?` placeholders as psycopg's `%s` (the schema has no literal `?` or `%`)."""
    return query.replace("%", "%%").replace("?", "%s")


class PostgresOutbox(Outbox):
    backend = "postgres"
    clock = "extract(epoch from clock_timestamp())::float8"
    skip_locked = "FOR UPDATE SKIP LOCKED"
    shared = True
    errors = psycopg.Error

    target: str

    def __init__(self, target: str, *, migrate: bool = True) -> None:
        self.target = target
        self._reconnect()
        try:
            if migrate:
                self.migrate()
        except BaseException:
            self._db.close()
            raise

    @property
    def display(self) -> str:
        return redact(self.target)

    def close(self) -> None:
        self._db.close()

    def _reconnect(self) -> None:
        try:
            self._db = psycopg.connect(self.target, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise DeliveryError(
                # libpq's message may quote a value of the URL (a bad %-escape in a password).
                f"{self.display}: cannot connect to the outbox database:"
                f" {scrub(_first_line(exc), self.target)}",
                hint="Check [outbox] url (NEWSLETTER_OUTBOX__URL), that the server runs and"
                " that this user may connect (password in PGPASSWORD or ~/.pgpass).",
            ) from None

    @property
    def broken(self) -> bool:
        return self._db.broken

    def _run(self, sql: str, params: Params = ()) -> int:
        try:
            return self._db.execute(_sql(sql), params).rowcount
        except psycopg.Error as exc:
            raise self._fault(exc) from exc

    def _fetch(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        try:
            return self._db.execute(_sql(sql), params).fetchall()
        except psycopg.Error as exc:
            raise self._fault(exc) from exc

    def _many(self, sql: str, rows: Iterable[Params]) -> None:
        try:
            with self._db.cursor() as cur:
                cur.executemany(_sql(sql), rows)
        except psycopg.Error as exc:
            raise self._fault(exc) from exc

    def _transaction(self) -> AbstractContextManager[None]:
        return self._locked(WRITE_LOCK)

    def _migration_lock(self) -> AbstractContextManager[None]:
        return self._locked(MIGRATION_LOCK)

    @contextmanager
    def _locked(self, key: int) -> Iterator[None]:
        """A transaction holding the advisory lock `key` from its start."""
        try:
            with self._db.transaction():
                self._run("SELECT pg_advisory_xact_lock(?)", (key,))
                yield
        except psycopg.Error as exc:  # BEGIN, COMMIT or the rollback: the block's are mapped
            raise self._fault(exc) from exc

    def _fault(self, exc: psycopg.Error) -> OutboxError:
        """The OutboxError that names what `exc` means for the delivery log, and the fix."""
        where, detail = self.display, scrub(_first_line(exc), self.target)
        retry = "re-run the same command to resume."
        if isinstance(exc, pg.DiskFull):
            return OutboxError(
                f"{where}: the database server's disk is full ({detail})",
                hint=f"Free space on the database server, then {retry}",
            )
        if isinstance(exc, pg.ReadOnlySqlTransaction):
            return OutboxError(
                f"{where}: the outbox database is read-only ({detail})",
                hint=f"Point [outbox] url at the primary server (not a standby), then {retry}",
            )
        if isinstance(exc, pg.InsufficientPrivilege):
            return OutboxError(
                f"{where}: the database user may not use the outbox tables ({detail})",
                hint="The database user needs the right to create tables in its schema and to"
                f" read and write them: grant it, then {retry}",
            )
        if isinstance(exc, pg.DataCorrupted | pg.IndexCorrupted):
            return OutboxError(
                f"{where}: the outbox database reports damaged data ({detail})",
                hint="Have the database repaired (REINDEX, or a restore) and check `newsletter"
                " status` before sending: rows the damage lost would be sent again.",
            )
        if isinstance(exc, pg.QueryCanceled | pg.LockNotAvailable):
            return OutboxError(
                f"{where}: the outbox database cancelled a statement ({detail})",
                hint="A statement_timeout or lock_timeout of the server, or an administrator's"
                f" pg_cancel_backend: {retry}",
            )
        if self._db.broken or isinstance(exc, psycopg.OperationalError):
            return OutboxError(
                f"{where}: lost the connection to the outbox database ({detail})",
                hint="The server restarted, failed over or ended this session"
                f" (pg_terminate_backend): once it answers again, {retry}",
            )
        return OutboxError(f"{where}: the outbox database failed: {detail}")

    def _script(self, migration: Migration) -> str:
        return migration.postgres

    @contextmanager
    def plan_lock(self, issue: int, list_name: str) -> Iterator[None]:
        # A session lock: the plan commits batch by batch under it, and a planner that dies
        # drops its connection and with it the lock.
        key = plan_key(issue, list_name)
        self._run("SELECT pg_advisory_lock(?)", (key,))
        try:
            yield
        except BaseException:
            with suppress(OutboxError):  # a lost session took its lock with it
                self._run("SELECT pg_advisory_unlock(?)", (key,))
            raise
        self._run("SELECT pg_advisory_unlock(?)", (key,))


def plan_key(issue: int, list_name: str) -> int:
    """The advisory lock of one send's planning: 64 bits of a hash of (issue, list)."""
    digest = hashlib.sha256(f"newsletter plan {issue} {list_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
